"""One plan per backend per run: options typed once, the graph optimized once, each plan lowered
once, one calibration per distinct graph, counted on real runs of the demo model."""

from __future__ import annotations

import collections
import json

import pytest

from quantemu.backends.registry import BackendSpec, known_backends
from quantemu.calibration import api as calibration_api
from quantemu.cli import main
from quantemu.graph import passes
from quantemu.program.options import LoweringOptions


@pytest.fixture
def counts(monkeypatch):
    """Counters of option parses (by options class), optimizations, lowerings (by backend) and
    calibrations, made by spies around the one function each goes through."""
    found = {
        "parsed": collections.Counter(),
        "optimized": 0,
        "lowered": collections.Counter(),
        "calibrated": 0,
    }
    from_mapping = LoweringOptions.from_mapping.__func__
    run_passes = passes.run_passes
    parse_options = BackendSpec.parse_options
    calibrate = calibration_api.calibrate

    def spy_from_mapping(cls, options=None):
        found["parsed"][cls.backend] += 1
        return from_mapping(cls, options)

    def spy_run_passes(graph, names=None, **kwargs):
        if names is None:  # the default pipeline: what optimize() runs
            found["optimized"] += 1
        return run_passes(graph, names, **kwargs)

    def spy_calibrate(*args, **kwargs):
        found["calibrated"] += 1
        return calibrate(*args, **kwargs)

    real_lower = {}

    def spy_parse_options(self, options):
        # Wrap each spec's lower() once, the first time its options are typed.
        if self.name not in real_lower:
            real_lower[self.name] = self.lower

            def lower(graph, ranges, opts, name=self.name):
                assert isinstance(opts, LoweringOptions), "lower() takes typed options only"
                found["lowered"][name] += 1
                return real_lower[name](graph, ranges, opts)

            object.__setattr__(self, "lower", lower)
        return parse_options(self, options)

    monkeypatch.setattr(LoweringOptions, "from_mapping", classmethod(spy_from_mapping))
    monkeypatch.setattr(passes, "run_passes", spy_run_passes)
    monkeypatch.setattr(calibration_api, "calibrate", spy_calibrate)
    monkeypatch.setattr(BackendSpec, "parse_options", spy_parse_options)
    yield found
    from quantemu.backends.registry import backend_spec

    for name, lower in real_lower.items():
        object.__setattr__(backend_spec(name), "lower", lower)


def _run(capsys, *argv) -> dict:
    assert main(["run", "demo", *argv, "--json", "-", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_backend_is_planned_and_lowered_once(counts, capsys):
    document = _run(capsys, "--backend", "all", "--option", "onednn.isa=avx2")
    assert [e["backend"] for e in document["evaluations"]] == known_backends()
    every = dict.fromkeys(known_backends(), 1)
    assert dict(counts["parsed"]) == every
    assert dict(counts["lowered"]) == every
    assert counts["optimized"] == 1
    # Every backend that calibrates sees the same optimized graph but tflite and xs3, whose
    # converter writes some operators out (BackendSpec.prepare) only where the model has them:
    # the demo model has none, so one calibration serves all.
    assert counts["calibrated"] == 1


def test_against_shares_the_run_plans(counts, capsys):
    _run(
        capsys, "--backend", "xs3", "--against", "tflite", "--option", "tflite.runtime=tflite_micro"
    )
    assert dict(counts["parsed"]) == {"xs3": 1, "tflite": 1}
    assert dict(counts["lowered"]) == {"xs3": 1, "tflite": 1}  # the evaluated program is reused
    assert counts["optimized"] == 1
    assert counts["calibrated"] == 1


def test_compile_and_qat_parse_once(counts):
    import numpy as np

    import quantemu
    from quantemu.data import demo_dataset, demo_model_path

    calib = demo_dataset("calib")[0][:16]
    quantemu.compile(demo_model_path(), "onednn", calib, isa="avx2")
    assert dict(counts["parsed"]) == {"onednn": 1}
    assert counts["optimized"] == 1
    assert dict(counts["lowered"]) == {"onednn": 1}
    torch_qat = pytest.importorskip("quantemu.torch")
    counts["parsed"].clear()
    qat = torch_qat.prepare(demo_model_path(), "nnie", calib, grouped_conv="log")
    qat.eval()
    qat(np.asarray(calib[:2]))
    qat(np.asarray(calib[:2]))  # unchanged weights: not lowered again
    assert dict(counts["parsed"]) == {"nnie": 1}
    assert counts["lowered"]["nnie"] == 1
