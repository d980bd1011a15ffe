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
