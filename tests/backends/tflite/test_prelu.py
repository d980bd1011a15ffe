"""PRELU: the kernel against its scalar twin (hypothesis, ``==``), against LiteRT's reference
kernel, TFLite-Micro and XMOS's host interpreter (``prelu_peer_vectors.json``, made by
``tools/make_prelu_vectors.py``), and the PRelu rule on an ONNX model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite import reference
from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.tflite.prelu import PreluParams, prelu_int8, prelu_params
from quantemu.errors import InvalidInputError

VECTORS = json.loads((Path(__file__).parent / "prelu_peer_vectors.json").read_text())["cases"]
#: Which runtime's Prepare each recorded peer follows (XMOS's runtime is TFLite-Micro).
PEER_RUNTIME = {
    "litert_reference": TfliteRuntime.LITERT_REFERENCE,
    "tflite_micro": TfliteRuntime.TFLITE_MICRO,
    "xmos_host_interpreter": TfliteRuntime.TFLITE_MICRO,
}

zero_points = st.integers(-128, 127)
scales = st.floats(1e-4, 1.0)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    q=st.tuples(scales, zero_points, scales, zero_points),
    q_alpha=st.tuples(st.floats(1e-4, 0.05), zero_points),
    micro=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_kernel_equals_its_scalar_twin(q, q_alpha, micro, seed):
    runtime = TfliteRuntime.TFLITE_MICRO if micro else TfliteRuntime.LITERT_REFERENCE
    p = prelu_params(*q, s_alpha=q_alpha[0], z_alpha=q_alpha[1], runtime=runtime)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (2, 3, 4, 5)).astype(np.int8)
    x[0, 0, 0, :2] = (-128, 127)  # the extremes, where the product is largest
    alpha = rng.integers(-128, 128, (3, 1, 1)).astype(np.int8)
    alpha[0] = -128
    got, counters = prelu_int8(x, alpha, p)
    xs, al = np.broadcast_arrays(x, alpha)
    want = [reference.prelu(int(a), int(b), p) for a, b in zip(xs.flat, al.flat, strict=True)]
    assert got.ravel().tolist() == want
    assert counters["output_saturated"] >= 0


def case_params(case: dict, runtime=TfliteRuntime.LITERT_REFERENCE):
    """The PRELU parameters of a recorded case for ``runtime``'s Prepare."""
    s_alpha, z_alpha = case["alpha_quant"]
    q = (*case["input_quant"], *case["output_quant"])
    return prelu_params(*q, s_alpha=s_alpha, z_alpha=z_alpha, runtime=runtime)


def _case(case: dict):
    h, w, c = case["input_nhwc"]
    x = np.frombuffer(bytes.fromhex(case["x"]), np.int8).reshape(case["samples"], h, w, c)
    alpha = np.frombuffer(bytes.fromhex(case["alpha"]), np.int8).reshape(case["alpha_shape"])
    return x, alpha


@pytest.mark.parametrize("index", range(len(VECTORS)))
def test_the_kernel_equals_every_peer(index):
    case = VECTORS[index]
    x, alpha = _case(case)
    for peer, codes in case["outputs"].items():
        got, _ = prelu_int8(
            x, alpha, case_params(case, PEER_RUNTIME[peer])
        )  # NHWC codes, alpha broadcast as the file does
        want = np.frombuffer(bytes.fromhex(codes), np.int8).reshape(got.shape)
        assert np.array_equal(got, want), peer


def test_the_vectors_tell_the_two_runtimes_prepare_apart():
    differ = 0
    for case in VECTORS:
        differ += case_params(case) != case_params(case, TfliteRuntime.TFLITE_MICRO)
    assert differ > 0
    # xcore-opt 1.4.2 keeps PRELU as a builtin: XMOS's TFLite-Micro runs it
    assert all(c["xcore_opt_operators"] == ["PRELU"] for c in VECTORS)


def test_parameters_and_operands_are_checked():
    with pytest.raises(InvalidInputError, match="s_alpha"):
        prelu_params(0.1, 0, 0.1, 0, s_alpha=0.0, z_alpha=0)
    with pytest.raises(InvalidInputError, match="alpha_zero_point"):
        PreluParams(0, 0, 1, 0, 1, 0, alpha_zero_point=200)
    p = prelu_params(0.1, 0, 0.1, 0, s_alpha=0.01, z_alpha=0)
    with pytest.raises(InvalidInputError, match="does not broadcast"):
        prelu_int8(np.zeros((1, 3, 2, 2), np.int8), np.zeros((4,), np.int8), p)


def _prelu_model(path: Path, slope: np.ndarray, constant: bool = True) -> str:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 5])]
    inits = [numpy_helper.from_array(slope.astype(np.float32), "slope")] if constant else []
    if not constant:
        inputs.append(helper.make_tensor_value_info("slope", TensorProto.FLOAT, slope.shape))
    graph = helper.make_graph(
        [helper.make_node("PRelu", ["x", "slope"], ["y"])],
        "prelu",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("backend", ["tflite", "xs3"])
def test_a_per_channel_prelu_lowers_to_prelu(tmp_path, backend):
    slope = np.array([0.1, -0.3, 0.25], np.float32).reshape(3, 1, 1)
    path = _prelu_model(tmp_path / "p.onnx", slope)
    x = np.random.default_rng(0).normal(0, 1, (4, 3, 4, 5)).astype(np.float32)
    program = quantemu.compile(path, backend, calib=x)
    (layer,) = program.lowered.layers
    assert layer.op == "PRELU"
    runtime = TfliteRuntime.TFLITE_MICRO if backend == "xs3" else TfliteRuntime.LITERT_REFERENCE
    e = program.lowered.input_encodings["x"]
    e_alpha = layer.alpha_encoding  # the slope's own min/max range, asymmetric
    assert np.isclose(e_alpha.scale, (0.25 + 0.3) / 255, rtol=1e-6)
    err = np.abs(e_alpha.dequantize(layer.alpha).ravel() - slope.ravel())
    assert np.all(err <= e_alpha.scale / 2 + 1e-7)
    assert layer.params == prelu_params(
        e.scale, e.zero_point, layer.encoding.scale, layer.encoding.zero_point,
        s_alpha=e_alpha.scale, z_alpha=e_alpha.zero_point, runtime=runtime,
    )  # fmt: skip
    result = program.run(x, keep="all").tensors
    want, _ = prelu_int8(result["x"].codes, layer.alpha, layer.params)
    np.testing.assert_array_equal(result["y"].codes, want)
    # and the program computes PReLU: within two output steps of the float result
    ref = np.where(x >= 0, x, x * slope)
    assert np.max(np.abs(result["y"].dequantize() - ref)) < 2 * float(layer.encoding.scale)


def test_a_computed_slope_is_refused_naming_it(tmp_path):
    path = _prelu_model(tmp_path / "p.onnx", np.ones((3, 1, 1)), constant=False)
    x = np.random.default_rng(0).normal(0, 1, (4, 3, 4, 5)).astype(np.float32)
    calib = {"x": x, "slope": np.full((3, 1, 1), 0.2, np.float32)}
    with pytest.raises(quantemu.errors.UnsupportedError, match="slope 'slope'"):
        quantemu.compile(path, "tflite", calib=calib)
