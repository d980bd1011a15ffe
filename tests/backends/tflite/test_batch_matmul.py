"""BATCH_MATMUL: the vectorized kernel against its scalar twin (==), and both against the
peers' recorded outputs (``tests/data/batch_matmul``, tools/make_batch_matmul_vectors.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import quantemu
from quantemu.backends.tflite.batch_matmul import (
    batch_matmul_int8,
    batch_matmul_params,
    batch_matmul_reference,
)
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.backends.tflite.strategies import codes, scales, zero_points

DATA = Path(__file__).resolve().parents[2] / "data" / "batch_matmul"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
#: Cases whose model is one BATCH_MATMUL of the two model inputs.
KERNEL_CASES = [k for k, c in MANIFEST["cases"].items() if c["ops"] == ["BATCH_MATMUL"]]
PEERS = ("litert_ref", "tflm")


@st.composite
def operands(draw):
    """Shapes of ranks 2..5 whose batch axes broadcast, with random adj_x / adj_y."""
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    n_batch = draw(st.integers(0, 3))
    full = [draw(st.integers(1, 3)) for _ in range(n_batch)]
    cut_a, cut_b = draw(st.integers(0, n_batch)), draw(st.integers(0, n_batch))
    ones_a = [d if draw(st.booleans()) else 1 for d in full[cut_a:]]
    ones_b = [d if draw(st.booleans()) else 1 for d in full[cut_b:]]
    adj_x, adj_y = draw(st.booleans()), draw(st.booleans())
    a_shape = (*ones_a, *((k, m) if adj_x else (m, k)))
    b_shape = (*ones_b, *((n, k) if adj_y else (k, n)))
    return draw(codes(a_shape)), draw(codes(b_shape)), adj_x, adj_y


@settings(max_examples=150, deadline=None)
@given(operands(), st.data())
def test_vectorized_matches_reference(ops, data):
    a, b, adj_x, adj_y = ops
    p = batch_matmul_params(
        data.draw(scales()),
        data.draw(zero_points),
        data.draw(scales()),
        data.draw(zero_points),
        data.draw(scales(2.0**-8, 4.0)),
        data.draw(zero_points),
    )
    y, counters = batch_matmul_int8(a, b, p, adj_x=adj_x, adj_y=adj_y)
    want = batch_matmul_reference(a, b, p, adj_x=adj_x, adj_y=adj_y)
    assert y.dtype == np.int8
    assert y.shape == want.shape
    assert np.array_equal(y, want)
    assert counters["output_saturated"] <= int(np.isin(want, (-128, 127)).sum())


def _case(name: str):
    c = MANIFEST["cases"][name]
    (bm,) = c["batch_matmul"]
    lhs, rhs, out = bm["lhs"], bm["rhs"], bm["output"]
    p = batch_matmul_params(
        lhs["scale"],
        lhs["zero_point"],
        rhs["scale"],
        rhs["zero_point"],
        out["scale"],
        out["zero_point"],
    )
    return np.load(DATA / f"{name}.npz"), p, bm["adj_x"], bm["adj_y"]


@pytest.mark.parametrize("name", KERNEL_CASES)
def test_peer_vectors(name):
    v, p, adj_x, adj_y = _case(name)
    for n in range(len(v["in0"])):
        a, b = v["in0"][n][None], v["in1"][n][None]
        y, _ = batch_matmul_int8(a, b, p, adj_x=adj_x, adj_y=adj_y)
        for peer in PEERS:
            assert np.array_equal(y[0], v[peer][n]), (name, peer, n)
    if name == KERNEL_CASES[0]:  # the scalar twin on one case too
        want = batch_matmul_reference(v["in0"][0][None], v["in1"][0][None], p, adj_y=adj_y)
        assert np.array_equal(want[0], v["litert_ref"][0])


def test_vectors_cover_the_attention_shapes():
    shapes = {tuple(MANIFEST["cases"][k]["batch_matmul"][0]["lhs"]["shape"]) for k in KERNEL_CASES}
    assert {(1, 16, 8), (1, 4, 16, 8), (1, 2, 1, 5, 6)} <= shapes
    flags = {
        tuple(MANIFEST["cases"][k]["batch_matmul"][0][f] for f in ("adj_x", "adj_y"))
        for k in KERNEL_CASES
    }
    assert {(False, False), (False, True), (True, False)} <= flags


def test_errors_name_the_shapes():
    p = batch_matmul_params(1.0, 0, 1.0, 0, 1.0, 0)
    a = np.zeros((2, 3), np.int8)
    with pytest.raises(InvalidInputError, match=r"\(2, 3\)"):
        batch_matmul_int8(a, a, p)
    with pytest.raises(InvalidInputError, match="do not broadcast"):
        batch_matmul_int8(np.zeros((2, 2, 3), np.int8), np.zeros((3, 3, 2), np.int8), p)
    with pytest.raises(UnsupportedError, match="rank 6"):
        batch_matmul_int8(np.zeros((1,) * 4 + (2, 3), np.int8), np.zeros((3, 2), np.int8), p)
    with pytest.raises(InvalidInputError, match="int8 codes"):
        batch_matmul_int8(a.astype(np.float32), a.T, p)


@pytest.mark.parametrize("name", KERNEL_CASES)
@pytest.mark.parametrize(
    ("runtime", "key"), [("litert_reference", "litert_ref"), ("tflite_micro", "tflm")]
)
def test_imported_models(name, runtime, key):
    """The .tflite model imported (BATCH_MATMUL -> MatMul, adj as Transpose) and lowered."""
    v, _, _, _ = _case(name)
    (bm,) = MANIFEST["cases"][name]["batch_matmul"]
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "tflite", runtime=runtime)
    feeds = {}
    for i, (inp, side) in enumerate(zip(program.graph.inputs, ("lhs", "rhs"), strict=True)):
        q = bm[side]  # the codes as floats on the model's own grid: quantized back exactly
        feeds[inp.name] = (v[f"in{i}"].astype(np.float32) - q["zero_point"]) * np.float32(
            q["scale"]
        )
    out = program.graph.outputs[0]
    for n in range(len(v["in0"])):  # the model's batch is 1 (ranks differ in bcast_5d)
        got = program.run_feeds({k: f[n : n + 1] for k, f in feeds.items()}).tensors[out].codes
        assert np.array_equal(got[0], v[key][n]), (name, n)
    assert "BATCH_MATMUL" in [layer.op for layer in program.lowered.layers]


def _attention(heads: int = 2):
    """x (N, 16, 32): q, k, v by constant MatMuls, softmax(q @ k^T) @ v, per head."""
    rng = np.random.default_rng(5)
    n = helper.make_node
    consts = [
        helper.make_tensor(w, TensorProto.FLOAT, [32, 16], rng.standard_normal(512) / 6)
        for w in ("wq", "wk", "wv")
    ]
    consts.append(helper.make_tensor("hs", TensorProto.INT64, [4], [1, 16, heads, 16 // heads]))
    nodes = [n("MatMul", ["x", w], [t]) for w, t in (("wq", "q0"), ("wk", "k0"), ("wv", "v0"))]
    for t in ("q", "k", "v"):
        nodes.append(n("Reshape", [f"{t}0", "hs"], [f"{t}1"]))
    nodes += [
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s"]),
        n("Softmax", ["s"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


CALIB = np.random.default_rng(0).standard_normal((8, 16, 32)).astype(np.float32)


@pytest.mark.parametrize("runtime", ["litert_reference", "tflite_micro"])
def test_attention_lowers_to_batch_matmul(runtime):
    program = quantemu.compile(_attention(), "tflite", calib=CALIB, runtime=runtime)
    layers = program.lowered.layers
    assert [la.op for la in layers].count("BATCH_MATMUL") == 2
    assert "FULLY_CONNECTED" in [la.op for la in layers]  # constant weights: unchanged path
    tensors = program.run(CALIB[:3], keep="all").tensors
    for la in layers:
        if la.op == "BATCH_MATMUL":
            a, b = (tensors[t].codes for t in la.inputs)
            want = np.stack(
                [batch_matmul_reference(a[i : i + 1], b[i : i + 1], la.params)[0] for i in range(3)]
            )
            assert np.array_equal(tensors[la.output].codes, want)


def test_xmos_refusals_name_batch_matmul():
    missing = "Didn't find op for builtin opcode 'BATCH_MATMUL'"
    for case in KERNEL_CASES:  # recorded: xcore-opt 1.4.2 and XMOS's runtime have no kernel
        xmos = MANIFEST["cases"][case]["xmos"]
        assert xmos["xcore_opt"]["returncode"] != 0
        assert missing in xmos["xcore_opt"]["messages"]
        assert missing in xmos["host_interpreter_int8"]["messages"]
    with pytest.raises(UnsupportedError, match=r"'/?MatMul.*xcore-opt 1\.4\.2 keeps") as info:
        quantemu.compile(_attention(), "xs3", calib=CALIB)
    assert missing in str(info.value)
    with pytest.raises(UnsupportedError, match=r"XMOS's runtime .* no BATCH_MATMUL kernel"):
        quantemu.compile(_attention(), "tflite", calib=CALIB, runtime="xmos_tflite_micro")


def test_nvdla_refuses_naming_the_node_and_why():
    with pytest.raises(UnsupportedError, match=r"MatMul.*both operands .* are activations"):
        quantemu.compile(_attention(), "nvdla", calib=CALIB)
