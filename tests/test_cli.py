"""The ``quantemu`` command: version, help, and subcommand dispatch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from quantemu import __version__
from quantemu.cli import main


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"quantemu {__version__}"


def test_no_subcommand_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "conformance" in capsys.readouterr().out


def test_unknown_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "quantemu", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"quantemu {__version__}"


def test_threads_option_applies_to_the_subcommand_only(monkeypatch):
    from quantemu.cli import conformance as command
    from quantemu.intmath import parallel

    seen = []
    monkeypatch.setattr(command, "run", lambda args: seen.append(parallel.threads()) or 0)
    before = parallel.threads()
    assert main(["--threads", "1", "conformance"]) == 0
    assert seen == [1]
    assert parallel.threads() == before


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_threads_option_rejects_non_positive_counts(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--threads", bad, "conformance"])
    assert exc.value.code == 2
    assert f"expected a positive integer, got {bad!r}" in capsys.readouterr().err
