"""int8 SQUARED_DIFFERENCE, RSQRT, MINIMUM and MAXIMUM: == LiteRT BUILTIN_REF and TFLite-Micro
on the recorded models (elementwise_peer_vectors.json, made by tools/make_elementwise_vectors.py),
== the Python-int twins (hypothesis), through the TFLite importer, and lowered from a float
graph onto ``tflite`` and ``xs3``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

import quantemu
from quantemu.backends.tflite import elementwise as EW
from quantemu.backends.tflite import maximum_minimum as MM
from quantemu.backends.tflite import rsqrt as R
from quantemu.backends.tflite.elementwise_params import squared_difference_params
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node, TensorInfo
from quantemu.program import LinearEncoding, QTensor
from tests.backends.tflite.strategies import codes, scales, zero_points

VECTORS = json.loads((Path(__file__).parent / "elementwise_peer_vectors.json").read_text())
CASES = VECTORS["cases"]
PEERS = ("litert_ref", "tflite_micro", "xmos_host_interpreter")


def _codes(h: str, shape) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(h), dtype=np.int8).reshape(shape).astype(np.int64)


def _operands(case: dict, feed: list[str]) -> list[np.ndarray]:
    out = []
    for o in case["operands"]:
        if "const_hex" in o:
            out.append(_codes(o["const_hex"], o["shape"]))
        else:
            out.append(_codes(feed[o["graph_input"]], o["shape"]))
    return out


def _kernel(case: dict, xs: list[np.ndarray]) -> np.ndarray:
    ops, out = case["operands"], case["output"]
    q = [(o["scale"], o["zero_point"]) for o in ops]
    if case["op"] == "RSQRT":
        return R.rsqrt_int8(xs[0], R.rsqrt_params(*q[0], out["scale"], out["zero_point"]))[0]
    if case["op"] == "SQUARED_DIFFERENCE":
        p = squared_difference_params(*q[0], *q[1], out["scale"], out["zero_point"])
        return EW.squared_difference_int8(xs[0], xs[1], p)[0]
    kernel = MM.minimum_int8 if case["op"] == "MINIMUM" else MM.maximum_int8
    return kernel(xs[0], xs[1])[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_equals_the_peers(case):
    shape = case["output"]["shape"]
    for k, feed in enumerate(case["inputs_hex"]):
        got = _kernel(case, _operands(case, feed)).tolist()
        assert got == _codes(case["litert_ref_hex"][k], shape).tolist()
        assert got == _codes(case["tflite_micro_hex"][k], shape).tolist()
        if "xmos_host_interpreter_hex" in case:
            assert got == _codes(case["xmos_host_interpreter_hex"][k], shape).tolist()


def test_recorded_peer_support():
    """LiteRT and TFLite-Micro run all four; XMOS's host interpreter has no SQUARED_DIFFERENCE;
    xcore-opt keeps each as a TFLite builtin."""
    for case in CASES:
        assert "litert_ref_hex" in case and "tflite_micro_hex" in case
        xmos_ok = "xmos_host_interpreter_hex" in case
        assert xmos_ok == (case["op"] != "SQUARED_DIFFERENCE"), case["name"]
        if "xcore_opt" in case:
            assert case["xcore_opt"] == {"returncode": 0, "ops": [case["op"]]}


QUANT = st.tuples(scales(2.0**-10, 2.0**-1), zero_points)


@given(QUANT, QUANT, st.tuples(scales(2.0**-8, 2.0**2), zero_points), codes((3, 8)), codes((1, 8)))
def test_squared_difference_equals_twin(q1, q2, qo, a, b):
    try:
        p = squared_difference_params(*q1, *q2, *qo)
    except UnsupportedError:
        return  # an output multiplier >= 1: the peers' arithmetic takes none
    y, counters = EW.squared_difference_int8(a, b, p)
    bb = np.broadcast_to(b, a.shape)
    expected = [
        EW.squared_difference_reference(int(u), int(v), p)
        for u, v in zip(a.ravel(), bb.ravel(), strict=True)
    ]
    assert y.dtype == np.int8 and y.ravel().tolist() == expected
    assert counters["output_saturated"] >= 0


@given(
    st.tuples(scales(2.0**-12, 2.0**2), zero_points),
    st.tuples(scales(2.0**-8, 2.0**2), zero_points),
)
def test_rsqrt_table_equals_twin(qi, qo):
    try:
        p = R.rsqrt_params(*qi, *qo)
    except UnsupportedError:
        return
    valid = np.arange(qi[1], 128)
    y, _ = R.rsqrt_int8(valid, p)
    assert y.tolist() == [R.rsqrt_reference(int(c), p) for c in valid]


@given(codes((4, 6)), codes((1, 6)))
def test_min_max_equal_twins(a, b):
    bb = np.broadcast_to(b, a.shape)
    pairs = list(zip(a.ravel().tolist(), bb.ravel().tolist(), strict=True))
    assert MM.minimum_int8(a, b)[0].ravel().tolist() == [MM.minimum_reference(*t) for t in pairs]
    assert MM.maximum_int8(a, b)[0].ravel().tolist() == [MM.maximum_reference(*t) for t in pairs]


def test_inv_sqrt_large_inputs_match_twin():
    v = np.array([2, 3, 4, 255, 256, 1000, 2**20 + 7, 2**28 + 3])
    inv, shift = R._inv_sqrt(v)
    assert list(zip(inv.tolist(), shift.tolist(), strict=True)) == [
        R._inv_sqrt_reference(int(x)) for x in v
    ]


def test_refusals():
    p = R.rsqrt_params(0.1, 0, 0.05, -128)
    with pytest.raises(InvalidInputError, match="below the input zero point 0"):
        R.rsqrt_int8(np.array([-1, 3]), p)
    with pytest.raises(InvalidInputError, match="do not broadcast"):
        MM.minimum_int8(np.zeros((2, 3), np.int8), np.zeros((2,), np.int8))
    with pytest.raises(InvalidInputError, match="int8"):
        EW.squared_difference_int8(
            np.array([300]), np.array([0]), squared_difference_params(1, 0, 1, 0, 1, 0)
        )
    with pytest.raises(UnsupportedError, match="output multiplier"):
        squared_difference_params(1.0, 0, 1.0, 0, 1e-6, 0)


# ---------------------------------------------------------------- lowering and import

CALIB = np.random.default_rng(3).uniform(-2, 3, (16, 4, 16)).astype(np.float32)


def _check_layers(program, x) -> list[str]:
    """Every SQUARED_DIFFERENCE / RSQRT / MINIMUM / MAXIMUM layer == its kernel on the codes
    the run fed it; the op list."""
    result = program.run(x, keep="all")
    t = result.tensors
    for layer in program.lowered.layers:
        if layer.op not in ("SQUARED_DIFFERENCE", "RSQRT", "MINIMUM", "MAXIMUM"):
            continue
        fed = iter(t[n].codes for n in layer.inputs)
        consts = getattr(layer, "constants", (None,))
        xs = [c if c is not None else next(fed) for c in consts]
        ins = [t[n] for n in layer.inputs]
        if layer.op == "RSQRT":
            p = R.rsqrt_params(
                ins[0].encoding.scale,
                ins[0].encoding.zero_point,
                layer.encoding.scale,
                layer.encoding.zero_point,
            )
            expected = R.rsqrt_int8(xs[0], p)[0]
        elif layer.op == "SQUARED_DIFFERENCE":
            expected = EW.squared_difference_int8(*xs, layer.params)[0]
        else:
            assert all(i.encoding == layer.encoding for i in ins)
            kernel = MM.maximum_int8 if layer.op == "MAXIMUM" else MM.minimum_int8
            expected = kernel(*xs)[0]
        assert t[layer.output].codes.tolist() == expected.tolist()
    return [layer.op for layer in program.lowered.layers]


def _layer_norm_like() -> Graph:
    """x -> (x - c)**2 + eps -> rsqrt -> max(., 0.3); min(x, 1.0): the IR the TFLite-style
    LayerNormalization / hard_sigmoid passes produce."""
    inits = {
        "c": np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 1, 16),
        "eps": np.array(1e-3, np.float32),
        "lo": np.array(0.3, np.float32),
        "one": np.array(1.0, np.float32),
    }
    nodes = [
        Node("sd", "SquaredDifference", ("x", "c"), ("d",)),
        Node("add", "Add", ("d", "eps"), ("v",)),
        Node("rs", "Rsqrt", ("v",), ("r",)),
        Node("mx", "Max", ("r", "lo"), ("m",)),
        Node("mn", "Min", ("x", "one"), ("h",)),
        Node("out", "Mul", ("m", "h"), ("y",)),
    ]
    return Graph("ln", (TensorInfo("x", ("N", 4, 16)),), ("y",), nodes, inits)


@pytest.mark.parametrize("runtime", ["litert_reference", "tflite_micro"])
def test_ir_graph_lowers_onto_tflite(runtime):
    program = quantemu.compile(_layer_norm_like(), "tflite", calib=CALIB, runtime=runtime)
    ops = _check_layers(program, CALIB[:4])
    assert {"SQUARED_DIFFERENCE", "RSQRT", "MAXIMUM", "MINIMUM"} <= set(ops)


def test_xmos_runtime_refuses_squared_difference():
    with pytest.raises(UnsupportedError, match="no SQUARED_DIFFERENCE"):
        quantemu.compile(_layer_norm_like(), "tflite", calib=CALIB, runtime="xmos_tflite_micro")


def test_ir_graph_lowers_onto_xs3():
    """xcore-opt keeps the four as builtins, run by TFLite-Micro's kernels."""
    program = quantemu.compile(_layer_norm_like(), "xs3", calib=CALIB)
    ops = _check_layers(program, CALIB[:4])
    assert {"SQUARED_DIFFERENCE", "RSQRT", "MAXIMUM", "MINIMUM"} <= set(ops)


def _onnx_min_max(n_inputs: int = 2):
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    neg = helper.make_tensor("neg", TensorProto.FLOAT, [1, 1, 16], np.linspace(-1, 0, 16))
    extra = ["neg"] * (n_inputs - 2)
    graph = helper.make_graph(
        [
            helper.make_node("Min", ["x", "one"], ["h"]),
            helper.make_node("Max", ["h", "neg", *extra], ["y"]),
        ],
        "minmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[one, neg],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_onnx_min_max_lower_onto_tflite():
    program = quantemu.compile(_onnx_min_max(), "tflite", calib=CALIB[:, :1].repeat(4, 1))
    assert _check_layers(program, CALIB[:1]) == ["MINIMUM", "MAXIMUM"]
    with pytest.raises(UnsupportedError, match="exactly two"):
        quantemu.compile(_onnx_min_max(3), "tflite", calib=CALIB[:1])


IMPORTED = [c for c in CASES if "model_hex" in c]


@pytest.mark.parametrize("runtime", ["litert_reference", "tflite_micro", "xmos_tflite_micro"])
@pytest.mark.parametrize("case", IMPORTED, ids=lambda c: c["name"])
def test_imported_model_equals_the_peers(case, runtime):
    """The int8 .tflite itself, imported and run: == every peer that runs it."""
    blob = bytes.fromhex(case["model_hex"])
    if runtime == "xmos_tflite_micro" and case["op"] == "SQUARED_DIFFERENCE":
        with pytest.raises(UnsupportedError, match="no SQUARED_DIFFERENCE"):
            quantemu.compile(blob, "tflite", runtime=runtime)
        return
    program = quantemu.compile(blob, "tflite", runtime=runtime)
    graph = program.graph
    expected = {"litert_reference": "litert_ref", "tflite_micro": "tflite_micro"}
    key = expected.get(runtime, "xmos_host_interpreter") + "_hex"
    shapes = {o["graph_input"]: o["shape"] for o in case["operands"] if "const_hex" not in o}
    for k, feed in enumerate(case["inputs_hex"]):
        feeds = {}
        for i, (info, h) in enumerate(zip(graph.inputs, feed, strict=True)):
            ov = graph.quant_overrides[info.name]
            enc = LinearEncoding(float(ov.scale), int(ov.zero_point), dtype=ov.dtype)
            feeds[info.name] = QTensor(_codes(h, shapes[i]).astype(np.int8), enc)
        got = program.run_feeds(feeds).tensors[graph.outputs[0]].codes
        want = _codes(case[key][k], case["output"]["shape"])
        assert got.reshape(want.shape).tolist() == want.tolist()


# ---------------------------------------------------------------- the float kernels


@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("opset", [8, 13])
def test_float_min_max_match_onnxruntime(op, opset):
    from tests.graph.onnx_models import assert_matches_ort, single

    pytest.importorskip("onnxruntime")
    assert_matches_ort(*single(op, [(2, 3, 5), (1, 5)], opset=opset), rtol=0, atol=0)


def test_float_rsqrt_and_squared_difference():
    g = _layer_norm_like()
    x = CALIB[:2]
    t = g.run_float({"x": x}, intermediates=True)
    d = np.square(x - g.initializers["c"], dtype=np.float32)
    np.testing.assert_array_equal(t["d"], d)
    v = t["v"].astype(np.float64)
    np.testing.assert_allclose(t["r"], 1 / np.sqrt(v), rtol=2**-23)
    np.testing.assert_array_equal(t["h"], np.minimum(x, 1.0))
