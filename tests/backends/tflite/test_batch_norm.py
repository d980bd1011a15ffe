"""A standalone BatchNormalization on the TFLite targets: written out before calibration as
TensorFlow's converter lowers it (MUL then ADD by per-channel constants,
``lower/decompose.py``), its intermediate calibrated, each operator run by the int8 MUL and ADD
kernels; and the converter's MUL-then-ADD form against LiteRT, TFLite-Micro and XMOS's runtime
(``batch_norm_peer_vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite.elementwise import add, mul
from quantemu.backends.tflite.lower.decompose import decompose_for_tf_converter
from quantemu.graph import load_onnx, optimize
from quantemu.graph.ops.normalize import batchnorm_affine

C = 6


def _stats(seed: int = 5):
    rng = np.random.default_rng(seed)
    return {
        "gamma": (1 + 0.3 * rng.standard_normal(C)).astype(np.float32),
        "beta": rng.uniform(-0.5, 0.5, C).astype(np.float32),
        "mean": rng.uniform(-0.3, 0.3, C).astype(np.float32),
        "var": rng.uniform(0.5, 2.0, C).astype(np.float32),
    }


def _bn_model(path, *, after_add: bool, spatial: bool = True, constant: bool = True) -> str:
    """``x (+ x2) -> BatchNormalization -> y``: after an Add, or at the input."""
    shape = ["N", C, 5, 4] if spatial else ["N", C]
    stats = _stats()
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    nodes, bn_in = [], "x"
    if after_add:
        inputs.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, shape))
        nodes.append(helper.make_node("Add", ["x", "x2"], ["s"]))
        bn_in = "s"
    inits = [numpy_helper.from_array(v, k) for k, v in stats.items()]
    if not constant:  # the scale comes in at run time
        inits = inits[1:]
        inputs.append(helper.make_tensor_value_info("gamma", TensorProto.FLOAT, [C]))
    nodes.append(
        helper.make_node(
            "BatchNormalization", [bn_in, "gamma", "beta", "mean", "var"], ["y"], epsilon=1e-3
        )
    )
    graph = helper.make_graph(
        nodes, "bn", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def _feeds(seed: int, after_add: bool, spatial: bool = True):
    rng = np.random.default_rng(seed)
    shape = (8, C, 5, 4) if spatial else (8, C)
    feeds = {"x": (rng.standard_normal(shape) * 1.5 + 0.3).astype(np.float32)}
    if after_add:
        feeds["x2"] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("after_add", [True, False])
@pytest.mark.parametrize("spatial", [True, False])
def test_batch_norm_written_out_computes_the_same(tmp_path, after_add, spatial):
    graph = optimize(
        load_onnx(_bn_model(tmp_path / "bn.onnx", after_add=after_add, spatial=spatial))
    )
    rewritten = decompose_for_tf_converter(graph)
    ops = [n.op_type for n in rewritten.nodes]
    assert ops == ["Add"] * after_add + ["Mul", "Add"]
    m, o = batchnorm_affine(*_stats().values(), 1e-3)
    shape = (C, 1, 1) if spatial else (C,)
    consts = [rewritten.initializers[n.inputs[1]] for n in rewritten.nodes[-2:]]
    np.testing.assert_array_equal(consts[0], m.reshape(shape))
    np.testing.assert_array_equal(consts[1], o.reshape(shape))
    feeds = _feeds(0, after_add, spatial)
    want, got = graph.run_float(feeds)["y"], rewritten.run_float(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["tflite", "xs3"])
@pytest.mark.parametrize("after_add", [True, False])
def test_batch_norm_runs_as_mul_then_add(tmp_path, backend, after_add):
    path = _bn_model(tmp_path / "bn.onnx", after_add=after_add)
    program = quantemu.compile(path, backend, calib=_feeds(1, after_add))
    layers = program.lowered.layers
    assert [layer.op for layer in layers][-2:] == (
        ["XC_mul", "XC_add"] if backend == "xs3" else ["MUL", "ADD"]
    )
    # the intermediate is a calibrated tensor of its own, as the converter's calibrator sees it
    mid = layers[-2].output
    assert mid.endswith("/mul")
    assert mid in program.ranges.tensors
    result = program.run(_feeds(1, after_add), keep="all")  # inside the calibrated ranges
    y = result.tensors["y"]
    want = program.graph.run_float(_feeds(1, after_add))["y"]
    # two int8 steps (the product, the sum) and int8 constants: a few output steps at most
    assert float(np.abs(y.dequantize() - want).max()) < 4 * float(y.encoding.scale)
    if backend == "tflite":  # the layers are the MUL and ADD kernels on their own parameters
        mul_layer, add_layer = layers[-2:]
        x_in = result.tensors[mul_layer.inputs[0]].codes
        prod, _ = mul(x_in, mul_layer.constants[1], mul_layer.params)
        np.testing.assert_array_equal(prod, result.tensors[mid].codes)
        out, _ = add(prod, add_layer.constants[1], add_layer.params)
        np.testing.assert_array_equal(out, y.codes)


def test_a_batch_norm_with_computed_parameters_is_refused_naming_it(tmp_path):
    path = _bn_model(tmp_path / "bn.onnx", after_add=False, constant=False)
    feeds = {**_feeds(1, False), "gamma": np.ones(C, np.float32)}
    with pytest.raises(quantemu.errors.UnsupportedError, match="BatchNormalization"):
        quantemu.compile(path, "tflite", calib=feeds)


VECTORS = json.loads((Path(__file__).parent / "batch_norm_peer_vectors.json").read_text())["cases"]
#: (backend, options) whose program each recorded peer's codes are compared with.
PEER_TARGETS = {
    "litert_reference": ("tflite", {}),
    "tflite_micro": ("tflite", {"runtime": "tflite_micro"}),
    "xmos_host_interpreter": ("xs3", {}),
}


@pytest.mark.parametrize("index", range(len(VECTORS)))
def test_mul_then_add_by_channel_constants_equals_every_peer(tmp_path, index):
    """The converter's batch normalization (``tools/make_batch_norm_vectors.py``) as LiteRT,
    TFLite-Micro and XMOS's runtime (after xcore-opt: XC_mul, XC_add) compute it."""
    case = VECTORS[index]
    path = tmp_path / "bn.tflite"
    path.write_bytes(bytes.fromhex(case["model"]))
    x = np.frombuffer(bytes.fromhex(case["x"]), np.int8).reshape(case["samples"], 1, -1)
    scale, zero_point = case["quantizations"][0]
    feed = ((x.astype(np.float32) - zero_point) * np.float32(scale)).reshape(
        case["samples"], *case["input_nhwc"]
    )  # the codes exactly, as floats the input's quantization gives back
    for peer, codes in case["outputs"].items():
        backend, options = PEER_TARGETS[peer]
        program = quantemu.compile(str(path), backend, **options)
        (name,) = program.lowered.input_encodings
        result = program.run({name: feed}, keep="all")
        got = result.tensors[program.graph.outputs[0]].codes
        want = np.frombuffer(bytes.fromhex(codes), np.int8)
        assert np.array_equal(got.ravel(), want), peer
