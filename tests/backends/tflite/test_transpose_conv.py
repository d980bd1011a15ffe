"""TRANSPOSE_CONV: the kernel against its scalar twin (hypothesis, ``==``), against LiteRT's
reference kernel and TFLite-Micro (``transpose_conv_peer_vectors.json``, made by
``tools/make_transpose_conv_vectors.py``), and the ConvTranspose rule on an ONNX model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite import reference
from quantemu.backends.tflite.params import FusedActivation, activation_range, conv_params
from quantemu.backends.tflite.transpose_conv import padding_before, transpose_conv2d

VECTORS = json.loads((Path(__file__).parent / "transpose_conv_peer_vectors.json").read_text())[
    "cases"
]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    dims=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
    window=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
    pads=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(-2, 3), st.integers(-2, 3)),
    zero_points=st.tuples(st.integers(-128, 127), st.integers(-128, 127)),
    seed=st.integers(0, 2**16),
)
def test_the_kernel_equals_its_scalar_twin(dims, window, pads, zero_points, seed):
    h, w, c_in, c_out = dims
    kernel, strides = window[:2], window[2:]
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (2, c_in, h, w)).astype(np.int8)
    wt = rng.integers(-127, 128, (c_in, c_out, *kernel)).astype(np.int8)
    bias = rng.integers(-5000, 5000, c_out)
    top, left, d_h, d_w = pads  # output size: the full one grown or cut at the end
    full = [(n - 1) * s + k for n, s, k in zip((h, w), strides, kernel, strict=True)]
    size = [full[0] - top + d_h, full[1] - left + d_w]
    if min(size) < 1:
        return
    scales = rng.uniform(0.001, 0.05, c_out)
    p = conv_params(0.05, zero_points[0], scales, 0.2, zero_points[1])
    geometry = {"strides": strides, "pads_before": (top, left), "output_size": tuple(size)}
    got, _ = transpose_conv2d(x, wt, bias, p, **geometry)
    np.testing.assert_array_equal(got, reference.transpose_conv2d(x, wt, bias, p, **geometry))


def _case(case: dict):
    h, w, c_in = case["input_nhwc"]
    x = np.frombuffer(bytes.fromhex(case["x"]), np.int8).reshape(case["samples"], h, w, c_in)
    kh, kw = case["kernel"]
    filt = np.frombuffer(bytes.fromhex(case["filter_ohwi"]), np.int8)
    wt = filt.reshape(case["out_channels"], kh, kw, c_in).transpose(3, 0, 1, 2)  # (I, O, kh, kw)
    return x.transpose(0, 3, 1, 2), wt, np.array(case["bias"])


@pytest.mark.parametrize("index", range(len(VECTORS)))
def test_the_kernel_equals_litert_and_tflite_micro(index):
    case = VECTORS[index]
    x, wt, bias = _case(case)
    (s_in, z_in), (s_out, z_out) = case["input"], case["output"]
    p = conv_params(s_in, z_in, case["weight_scales"], s_out, z_out)
    act = FusedActivation[case["activation"]]
    low, high = activation_range(act, np.float32(s_out), z_out)
    p = dataclasses.replace(p, act_min=low, act_max=high)
    oh, ow = case["output_hw"]
    pads = tuple(
        padding_before(case["padding"], k, s, o)
        for k, s, o in zip(case["kernel"], case["strides"], (oh, ow), strict=True)
    )
    geometry = {"strides": tuple(case["strides"]), "pads_before": pads, "output_size": (oh, ow)}
    got, _ = transpose_conv2d(x, wt, bias, p, **geometry)
    got = got.transpose(0, 2, 3, 1)
    for peer in ("litert_reference", "tflite_micro"):
        want = np.frombuffer(bytes.fromhex(case["outputs"][peer]), np.int8).reshape(got.shape)
        assert np.array_equal(got, want), peer


def test_xcore_opt_rewrites_every_transpose_conv():
    assert all("XC_conv2d_v2" in c["xcore_opt_operators"] for c in VECTORS)


def _model(path: Path, *, pads, output_padding=(0, 0), group=1, strides=(2, 2)) -> str:
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((4, 6 // group, 3, 3)) * 0.3).astype(np.float32)
    b = rng.uniform(-0.2, 0.2, 6).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], strides=list(strides),
        pads=list(pads), output_padding=list(output_padding), group=group,
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "ct",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 5, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize(
    ("pads", "output_padding"),
    [((1, 1, 1, 1), (1, 1)), ((0, 0, 0, 0), (0, 0)), ((1, 0, 0, 1), (0, 1))],
)
def test_conv_transpose_lowers_to_transpose_conv(tmp_path, pads, output_padding):
    path = _model(tmp_path / "ct.onnx", pads=pads, output_padding=output_padding)
    x = np.random.default_rng(0).normal(0, 1, (3, 4, 5, 6)).astype(np.float32)
    program = quantemu.compile(path, "tflite", calib=x)
    (layer,) = program.lowered.layers
    assert layer.op == "TRANSPOSE_CONV"
    result = program.run(x, keep="all").tensors
    want, _ = transpose_conv2d(
        result["x"].codes, layer.weights, layer.bias, layer.params, strides=(2, 2),
        pads_before=pads[:2], output_size=result["y"].codes.shape[2:],
    )  # fmt: skip
    np.testing.assert_array_equal(result["y"].codes, want)
    err = np.abs(result["y"].dequantize() - program.graph.run_float(x)["y"])
    assert float(err.max()) < 3 * float(result["y"].encoding.scale)


def test_grouped_conv_transpose_and_xs3_are_refused_with_the_reason(tmp_path):
    x = np.random.default_rng(0).normal(0, 1, (3, 4, 5, 6)).astype(np.float32)
    grouped = _model(tmp_path / "g.onnx", pads=(0, 0, 0, 0), group=2)
    with pytest.raises(quantemu.errors.UnsupportedError, match="group"):
        quantemu.compile(grouped, "tflite", calib=x)
    plain = _model(tmp_path / "p.onnx", pads=(1, 1, 1, 1), output_padding=(1, 1))
    with pytest.raises(quantemu.errors.UnsupportedError, match="xcore-opt"):
        quantemu.compile(plain, "xs3", calib=x)
