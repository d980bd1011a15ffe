"""Smoke tests of bench/: the timing harness returns well-formed numbers, the scripts parse.

No timing is asserted here (issue 17: timings never go in tests); ``bench/simulate.py`` and
the other scripts are where speed is measured.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # last: bench/distributed.py must not shadow Dask's package

import _timing  # noqa: E402 (bench/ is a script directory, not a package)


def test_compare_is_well_formed():
    calls = [0, 0]

    def a():
        calls[0] += 1

    def b():
        calls[1] += 1

    c = _timing.compare([a, b], 3, min_calls=3, min_seconds=0.0, names=("a", "b"))
    assert c.names == ("a", "b")
    assert [len(t) for t in c.times] == [3, 3]
    assert all(n >= 9 for n in c.calls)
    assert calls[0] == c.calls[0] + 3  # one untimed warm-up call per block
    values = [*c.ratios(), c.ratio(), *c.spread(), *c.quartiles(), c.median_time(1)]
    assert all(math.isfinite(v) and v > 0 for v in values)
    lo, hi = c.spread()
    assert lo <= c.ratio() <= hi
    assert "3 rounds" in c.summary()


def test_compare_rejects_one_engine():
    with pytest.raises(ValueError, match="2\\+ engines"):
        _timing.compare([lambda: None], 3)


def test_machine_record_and_blas_threads():
    lines = _timing.machine_record()
    assert lines and all(isinstance(line, str) and line for line in lines)
    assert any("thread env" in line for line in lines)
    with _timing.blas_threads(1) as how:
        assert isinstance(how, str)


def _script(name: str):
    """``bench/NAME.py`` loaded under its own module name (a bare "simulate" or "distributed"
    could resolve to another module)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _help_exits_cleanly(module, *argv: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        module.main([*argv, "--help"])
    assert exit_info.value.code == 0


def test_simulate_parses_quick():
    pytest.importorskip("onnx")
    simulate = _script("simulate")
    args = simulate._parser().parse_args(["--quick", "--batch", "16"])
    assert args.quick and args.batch == 16
    _help_exits_cleanly(simulate, "--quick")


def test_simulate_memory_child_runs_a_tiny_batch():
    """The fresh-process peak-memory probe behind ``--batch`` (no number asserted)."""
    pytest.importorskip("onnxruntime")
    simulate = _script("simulate")
    for engine in ("onnxruntime", "xs3"):
        assert simulate._peak_mib(engine, 2, 32, {}) > 0


@pytest.mark.parametrize(
    ("name", "needs"),
    [("evaluate", "onnx"), ("qat", "torch"), ("distributed", "distributed"), ("rnn", "torch")],
)
def test_bench_script_parses(name, needs):
    pytest.importorskip(needs)
    _help_exits_cleanly(_script(name))
