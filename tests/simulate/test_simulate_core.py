"""The simulation core: encodings, running a lowered model, per-layer metrics, input checks.

A hand-written lowering of a one-node ReLU model stands in for a backend, so these tests pin
the core's arithmetic (LSB error, SQNR, counters) independently of any backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model

from quantemu.calibration.api import calibrate
from quantemu.errors import InvalidInputError
from quantemu.graph import load_onnx, optimize
from quantemu.program.options import LoweringOptions
from quantemu.simulate import (
    Layer,
    LayerOutput,
    LinearEncoding,
    LoweredModel,
    Program,
    QTensor,
    compile_model,
)
from quantemu.simulate.plan import BackendPlan, RangeSource

ENC = LinearEncoding(scale=0.125, zero_point=0, dtype="int8")


@dataclass(frozen=True, kw_only=True)
class ReluLayer(Layer):
    """ReLU on codes (exact for zero point 0); ``bump`` adds one LSB to the first element."""

    bump: bool = False
    transpose: bool = False  # a layout mistake: codes (4, N) for a float tensor (N, 4)

    def compute(self, inputs):
        codes = np.maximum(inputs[0].codes, 0).astype(np.int8)
        if self.transpose:
            codes = codes.T
        if self.bump:
            codes = codes.copy()
            codes.flat[0] += 1
        return LayerOutput(QTensor(codes, ENC), {"clamped": int(np.sum(inputs[0].codes < 0))})


def _program(bump=False, transpose=False) -> Program:
    graph = optimize(
        load_onnx(model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 4]}, ["y"]))
    )
    ranges = calibrate(graph, np.zeros((2, 4), np.float32), progress=False)
    relu = ReluLayer(
        name="relu",
        op="test:relu",
        inputs=("x",),
        output="y",
        exact=True,
        note="",
        bump=bump,
        transpose=transpose,
    )
    lowered = LoweredModel("test", {"x": ENC}, (relu,), {"rounding": "none"})
    plan = BackendPlan("test", LoweringOptions(), graph, ranges, RangeSource.CALIBRATED)
    return Program(plan, lowered)


def test_linear_encoding_round_trip_and_saturation():
    enc = LinearEncoding(scale=0.5, zero_point=-3, dtype="int8")
    # 1.25/0.5 = 2.5 -> 2 (half to even) -> code -1; 1000 saturates at 127.
    codes = enc.quantize(np.array([0.0, 1.25, 1000.0, -1000.0], np.float32))
    assert codes.tolist() == [-3, -1, 127, -128]
    assert codes.dtype == np.int8
    assert enc.dequantize(codes).tolist() == [0.0, 1.0, 65.0, -62.5]


def test_linear_encoding_per_channel():
    enc = LinearEncoding(scale=np.array([1.0, 0.5]), zero_point=np.array([0, 2]), axis=1)
    x = np.array([[3.0, 3.0]], np.float32)
    assert enc.quantize(x).tolist() == [[3, 8]]
    assert enc.dequantize(enc.quantize(x)).tolist() == [[3.0, 3.0]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale": 0.0}, "finite and > 0"),
        ({"scale": 1.0, "dtype": "int4"}, "dtype"),
        ({"scale": np.array([1.0, 2.0])}, "axis"),
    ],
)
def test_linear_encoding_errors(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        LinearEncoding(**kwargs)


def test_run_keeps_codes_and_counters():
    prog = _program()
    x = np.array([[-1.0, 0.3, 0.5, 20.0]], np.float32)
    result = prog.run(x, keep="all")
    # 0.3/0.125 = 2.4 -> 2; 20/0.125 = 160 saturates to 127 at the input quantizer.
    assert result.tensors["x"].codes.tolist() == [[-8, 2, 4, 127]]
    assert result.tensors["y"].codes.tolist() == [[0, 2, 4, 127]]
    assert result.counters["relu"] == {"clamped": 1}
    assert result.outputs["y"].tolist() == [[0.0, 0.25, 0.5, 15.875]]


def test_evaluate_measures_lsb_error_against_the_ideal_quantizer():
    x = np.array([[-1.0, 0.3, 0.5, 1.0], [0.25, -0.5, 2.0, 0.125]], np.float32)
    exact = _program().evaluate(x)
    layer = exact.layers[0]
    # ReLU commutes with a zero-point-0 quantizer: the codes equal the ideal ones.
    assert (layer.max_abs_lsb, layer.fraction_off) == (0, 0.0)
    assert layer.counters == {"clamped": 2}  # -1.0 and -0.5
    # The only error is the input rounding 0.3 -> 0.25: SQNR = 10 log10(sum ref^2 / 0.05^2).
    ref_sq = 0.3**2 + 0.5**2 + 1.0**2 + 0.25**2 + 2.0**2 + 0.125**2
    assert layer.sqnr_db == pytest.approx(10 * math.log10(ref_sq / 0.05**2), rel=1e-6)
    bumped = _program(bump=True).evaluate(x, batch_size=1).layers[0]
    # One bumped element per batch of one sample: 2 of 8 elements off by exactly one LSB.
    assert (bumped.max_abs_lsb, bumped.fraction_off) == (1, 2 / 8)
    assert bumped.lsb_histogram[8 + 1] == 2 and bumped.lsb_histogram[8] == 6


def test_evaluate_accuracy_and_agreement():
    x = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 2.0, 0.0, 0.0]], np.float32)
    ev = _program().evaluate(x, np.array([3, 0]))
    assert (ev.float_accuracy, ev.backend_accuracy, ev.agreement) == (0.5, 0.5, 1.0)
    assert ev.to_dict()["layers"][0]["name"] == "relu"
    with pytest.raises(InvalidInputError, match="one label per sample"):
        _program().evaluate(x, np.array([1, 2, 3]))


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((2, 5), np.float32), r"expected shape \(N, 4\)"),
        (np.zeros((2, 4), np.uint8), "float data"),
        (np.zeros((4,), np.float32), "expected shape"),
    ],
)
def test_run_rejects_bad_inputs(x, match):
    with pytest.raises(InvalidInputError, match=match):
        _program().run(x, keep="all")


def test_compile_rejects_unknown_backend():
    with pytest.raises(InvalidInputError, match="unknown backend 'tpu'"):
        compile_model(_program().graph, "tpu", np.zeros((1, 4), np.float32))


def test_compile_needs_calibration_data():
    with pytest.raises(InvalidInputError, match="calibration data"):
        compile_model(_program().graph, "xs3")


def test_compile_passes_a_model_option_to_the_backend():
    # `model` is positional-only in compile_model, so the xs3 option of that name reaches lower().
    prog = compile_model(
        _program().graph, "xs3", np.ones((2, 4), np.float32), model="device", progress=False
    )
    assert "device" in " ".join(prog.header.values())


def test_evaluate_rejects_a_layout_mismatch_instead_of_reshaping():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(InvalidInputError, match="graph's layout"):
        _program(transpose=True).evaluate(x)
