"""The backend registry drives the command line: ``--backend``, ``--option``, ``--isa``,
``inspect --lint`` and ``quantemu backends`` read it; nothing names a backend in the CLI."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from quantemu.backends import registry
from quantemu.backends.registry import backend_spec, backend_specs, known_backends
from quantemu.cli import build_parser, main
from quantemu.cli.options import check_options, isa_backends, parse_options


def _choices(argv_prefix: list[str], dest: str) -> list[str]:
    """The argparse choices of option ``dest`` of the subcommand ``argv_prefix[0]``."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    command = sub.choices[argv_prefix[0]]
    return list(next(a for a in command._actions if a.dest == dest).choices)


def test_backend_choices_are_the_registered_backends():
    assert _choices(["run"], "backend") == [*known_backends(), "all"]
    assert _choices(["demo"], "backend") == [*known_backends(), "all"]


def test_option_values_are_typed_by_each_backends_options_class():
    texts = ["nnie.grouped_conv=log", "onednn.reduce_range=true", "onednn.threads=2"]
    typed = check_options(parse_options(texts, known_backends(), "avx2"))
    assert typed["nnie"].grouped_conv.value == "log"
    assert typed["onednn"].reduce_range is True
    assert typed["onednn"].threads == 2 and type(typed["onednn"].threads) is int
    assert typed["onednn"].isa.value == "avx2"
    for name in known_backends():
        assert isinstance(typed[name], backend_spec(name).options)


def test_isa_goes_to_the_backends_whose_options_have_an_isa_field():
    takers = [s.name for s in backend_specs() if "isa" in s.options.field_names()]
    assert isa_backends() == takers and takers
    options = parse_options([], known_backends(), "avx2")
    assert {b for b, o in options.items() if o} == set(takers)
    assert all(o == {"isa": "avx2"} for b, o in options.items() if b in takers)


def _run(capsys, *argv):
    code = main(["run", "demo", "-q", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_isa_on_a_backend_without_isa_is_a_usage_error(capsys):
    no_isa = next(b for b in known_backends() if b not in isa_backends())
    code, _, err = _run(capsys, "--backend", no_isa, "--isa", "avx2")
    assert code == 2
    assert f"--isa avx2: backend {no_isa} has no ISA choice" in err
    assert f"applies to {', '.join(isa_backends())}" in err


def test_unknown_option_lists_the_valid_ones_before_calibrating(capsys):
    code, out, err = _run(capsys, "--backend", "all", "--option", "nnie.speed=3")
    assert code == 2 and out == ""
    assert err == (
        "quantemu run: error: nnie: unknown option(s) 'speed'; the options are "
        f"{backend_spec('nnie').options.choices_text()}\n"
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("onednn.threads=two", "onednn option threads = 'two': expected an integer"),
        ("onednn.reduce_range=maybe", "onednn option reduce_range = 'maybe'; use true or false"),
        ("nnie.grouped_conv=cubic", "nnie option grouped_conv = 'cubic'; choose one of"),
    ],
)
def test_bad_option_value_is_a_usage_error(capsys, option, message):
    code, _, err = _run(capsys, "--backend", "all", "--option", option)
    assert code == 2 and message in err, err


def test_typed_options_reach_the_lowering(capsys):
    code, out, err = _run(
        capsys,
        "--backend",
        "onednn",
        "--isa",
        "avx2",
        "--option",
        "onednn.threads=2",
        "--option",
        "reduce_range=true",
        "--json",
        "-",
    )
    assert code == 0, err
    (ev,) = json.loads(out)["evaluations"]
    assert ev["header"]["isa"] == "avx2"
    assert ev["header"]["reduce_range"] == "True" and ev["header"]["threads"] == "2"


def test_inspect_lint_choices_are_the_backends_with_a_lint(monkeypatch, capsys):
    known_backends()  # the catalog, before the fake joins it
    calls = []

    def lint(graph):
        calls.append(graph)
        return [
            SimpleNamespace(
                node="n", rule="r", severity=SimpleNamespace(value="error"), message="m", advice="a"
            )
        ]

    fake = dataclasses.replace(backend_spec(known_backends()[0]), name="linted", lint=lint)
    monkeypatch.setitem(registry._BACKENDS, "linted", fake)
    with_lint = [s.name for s in backend_specs() if s.lint is not None]
    assert _choices(["inspect"], "lint") == with_lint and "linted" in with_lint
    assert main(["inspect", "demo", "--lint", "linted"]) == 1
    assert len(calls) == 1 and "linted model constraints" in capsys.readouterr().out
    no_lint = next(s.name for s in backend_specs() if s.lint is None)
    with pytest.raises(SystemExit) as exc:
        main(["inspect", "demo", "--lint", no_lint])
    assert exc.value.code == 2


def test_backends_command_lists_the_registry(capsys):
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    for spec in backend_specs():
        assert spec.name in out and spec.target in out
        assert spec.options.field_names()[0] in out
        assert (f"--lint {spec.name}" in out) == (spec.lint is not None)
