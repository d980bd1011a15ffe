"""examples/qat_nvdla.py: its constructed case is honest (the float model is unchanged) and its
numbers come from quantemu on the exported files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import quantemu
from quantemu.data import demo_dataset, demo_model_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qat_nvdla.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("qat_nvdla", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reparametrized_model_computes_the_same_float_function(example, tmp_path):
    x = demo_dataset("test")[0].astype(np.float32)
    before = quantemu.load_onnx(demo_model_path()).run_float(x)["logits"]
    after = quantemu.load_onnx(example.imbalanced_model(tmp_path / "m.onnx")).run_float(x)
    np.testing.assert_allclose(after["logits"], before, rtol=1e-4, atol=1e-4)  # float rounding
    assert np.array_equal(after["logits"].argmax(1), before.argmax(1))


def test_one_short_run_reports_accuracies_measured_on_the_exports(example, tmp_path):
    r = example.run(seeds=1, epochs=1, folder=tmp_path)
    assert r["float"] == pytest.approx(357 / 360)  # the demo's recorded float accuracy
    assert r["ptq"] < r["float"]  # the constructed case loses accuracy on NVDLA
    for key in ("qat_exact", "qat_fake_quant"):
        assert len(r[f"{key}_runs"]) == 1 and 0 < r[key] <= 1
    assert sorted(p.name for p in tmp_path.glob("*_0.onnx")) == ["exact_0.onnx", "fake_0.onnx"]
