"""Passes for exported Linear layers, Div by a constant and hard-swish (graph.passes_linear).

Each rewrite keeps ``run_float`` equal to onnxruntime on the original model and the graph
outputs' names; the end-to-end test compiles a transformer MLP block, exported as PyTorch
writes ``nn.Linear`` on (N, T, C) (MatMul + Add), on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, run_ort, weights

import quantemu
from quantemu.backends.registry import known_backends
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx
from quantemu.graph.ir import QuantOverride
from quantemu.graph.passes_linear import div_by_constant, fuse_hard_swish, fuse_matmul_add

pytest.importorskip("onnxruntime", reason=ORT_REASON)

RNG = np.random.default_rng(15)
n = helper.make_node


def _ops(graph):
    return [node.op_type for node in graph.nodes]


def _x(*shape, scale=1.0):
    return {"x": (RNG.normal(size=shape) * scale).astype(np.float32)}


def _linear(x_shape, bias_shape=(5,), bias_first=False, outputs=("y",), extra=()):
    inits = {"w": weights((8, 5))}
    nodes = [n("MatMul", ["x", "w"], ["h"])]
    if bias_shape is not None:
        inits["b"] = weights(bias_shape, 3, scale=0.5)
        nodes.append(n("Add", ["b", "h"] if bias_first else ["h", "b"], ["y"]))
    return model([*nodes, *extra], {"x": x_shape}, list(outputs), inits)


@pytest.mark.parametrize(
    ("bias_shape", "bias_first"), [((5,), False), ((1, 5), True), ((), False), ((1,), True)]
)
def test_matmul_add_on_2d_input_becomes_one_gemm(bias_shape, bias_first):
    m = _linear([3, 8], bias_shape, bias_first)
    graph = assert_matches_ort(m, _x(3, 8), optimize=True, rtol=1e-6, atol=1e-6)
    assert _ops(graph) == ["Gemm"] and graph.nodes[0].outputs == ("y",)
    assert graph.nodes[0].attrs == {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}
    assert graph.initializers[graph.nodes[0].inputs[2]].shape == (5,)


@pytest.mark.parametrize(
    ("x_shape", "feed"),
    [(["N", 4, 8], (3, 4, 8)), ([2, 4, 8], (2, 4, 8)), (["N", 2, 3, 8], (2, 2, 3, 8))],
)
@pytest.mark.parametrize("bias", [True, False])
def test_nd_matmul_becomes_reshape_gemm_reshape(x_shape, feed, bias):
    m = _linear(x_shape, (5,) if bias else None, outputs=("y" if bias else "h",))
    graph = assert_matches_ort(m, _x(*feed), optimize=True, rtol=1e-6, atol=1e-6)
    assert _ops(graph) == ["Reshape", "Gemm", "Reshape"]
    assert graph.outputs == (("y",) if bias else ("h",)) == graph.nodes[-1].outputs
    assert graph.nodes[0].attrs["shape"] == (-1, 8)
    assert graph.nodes[-1].attrs["shape"] == (
        *(d if isinstance(d, int) else -1 for d in x_shape[:-1]),
        5,
    )
    assert len(graph.nodes[1].inputs) == (3 if bias else 2)
    # a symbolic batch stays symbolic: the same graph runs any batch
    if not isinstance(x_shape[0], int):
        assert graph.run_float(_x(5, *feed[1:]))[graph.outputs[0]].shape == (5, *feed[1:-1], 5)


def test_activation_after_an_nd_linear_is_fused_into_the_gemm():
    m = _linear(["N", 4, 8], extra=[n("Relu", ["y"], ["r"])], outputs=("r",))
    graph = assert_matches_ort(m, _x(2, 4, 8), optimize=True, rtol=1e-6, atol=1e-6)
    assert _ops(graph) == ["Reshape", "Gemm", "Reshape"] and graph.outputs == ("r",)
    assert graph.nodes[1].attrs["activation"] == "relu" and graph.nodes[-1].outputs == ("r",)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("shared", ["MatMul", "Add", "Relu"]),  # h read twice: the Add stays
        ("output", ["MatMul", "Add"]),  # h is a graph output
        ("per_row_bias", ["MatMul", "Add"]),  # a (3, 1) bias is no per-channel bias
        ("runtime_weight", ["MatMul", "Add"]),
        ("two_symbolic", ["MatMul", "Add"]),  # no constant target restores two unknown dims
    ],
)
def test_matmul_add_left_alone(case, expected):
    inits = {"w": weights((8, 5)), "b": weights((5,), 3)}
    nodes = [n("MatMul", ["x", "w"], ["h"]), n("Add", ["h", "b"], ["y"])]
    inputs, outputs, feeds = {"x": [3, 8]}, ["y"], _x(3, 8)
    if case == "shared":
        nodes.append(n("Relu", ["h"], ["r"]))
        outputs.append("r")
    elif case == "output":
        outputs.append("h")
    elif case == "per_row_bias":
        inits["b"] = weights((3, 1), 3)
    elif case == "runtime_weight":
        inputs["w"] = [8, 5]
        del inits["w"]
        feeds["w"] = weights((8, 5), 9)
    else:
        inputs["x"], feeds = ["N", "T", 8], _x(2, 3, 8)
    graph = assert_matches_ort(model(nodes, inputs, outputs, inits), feeds, optimize=True)
    assert _ops(graph) == expected


def test_overrides_stay_on_the_final_tensor():
    graph = load_onnx(_linear(["N", 4, 8]))
    y = QuantOverride(np.float32(0.05), np.int8(0))
    h = QuantOverride(np.float32(0.04), np.int8(0))
    b = QuantOverride(np.float32(0.002), np.int32(0), values=np.zeros(5, np.int32))
    fused = fuse_matmul_add(graph.replace(quant_overrides={"y": y, "b": b}))
    assert _ops(fused) == ["Reshape", "Gemm", "Reshape"] and fused.quant_overrides["y"] is y
    assert fused.nodes[1].inputs[2] == "b" and fused.quant_overrides["b"] is b
    assert fused.quant_overrides[fused.nodes[1].outputs[0]] is y  # the Gemm's codes, reshaped
    kept = fuse_matmul_add(graph.replace(quant_overrides={"h": h}))
    # h is quantized on its own in a QDQ model: the bias Add stays, the MatMul still flattens
    assert _ops(kept) == ["Reshape", "Gemm", "Reshape", "Add"] and kept.quant_overrides["h"] is h


@pytest.mark.parametrize("divisor", [4.0, -0.5, 0.125, np.array([2.0, 4.0, 0.25, 1.0, 8.0])])
def test_div_by_a_power_of_two_becomes_an_exact_mul(divisor):
    inits = {"c": np.asarray(divisor, np.float32)}
    m = model([n("Div", ["x", "c"], ["y"])], {"x": ["N", 3, 5]}, ["y"], inits)
    feeds = _x(2, 3, 5, scale=1e3)
    graph = div_by_constant(load_onnx(m))
    assert _ops(graph) == ["Mul"] and graph.outputs == ("y",)
    np.testing.assert_array_equal(graph.run_float(feeds)["y"], run_ort(m, feeds)[0])


@pytest.mark.parametrize("divisor", [3.0, 6.0, np.array([2.0, 3.0]), 0.0])
def test_div_by_other_constants_is_kept(divisor):
    inits = {"c": np.asarray(divisor, np.float32)}
    m = model([n("Div", ["x", "c"], ["y"])], {"x": [3, 2]}, ["y"], inits)
    assert _ops(div_by_constant(load_onnx(m))) == ["Div"]
    # a constant divided by x is no scaling of x
    m = model([n("Div", ["c", "x"], ["y"])], {"x": [3, 2]}, ["y"], {"c": np.float32(2)})
    assert _ops(div_by_constant(load_onnx(m))) == ["Div"]


_HS_CONSTS = {
    "three": np.float32(3),
    "zero": np.float32(0),
    "six": np.float32(6),
    "sixth": np.float32(1 / 6),
}
_HARD_SWISH = {
    "hard_sigmoid": [
        n("HardSigmoid", ["x"], ["g"], alpha=1 / 6, beta=0.5),
        n("Mul", ["x", "g"], ["y"]),
    ],
    "clip_mul_div": [
        n("Add", ["x", "three"], ["a"]),
        n("Clip", ["a", "zero", "six"], ["c"]),
        n("Mul", ["x", "c"], ["p"]),
        n("Div", ["p", "six"], ["y"]),
    ],
    "clip_div_mul": [
        n("Add", ["three", "x"], ["a"]),
        n("Clip", ["a", "zero", "six"], ["c"]),
        n("Div", ["c", "six"], ["g"]),
        n("Mul", ["g", "x"], ["y"]),
    ],
    "clip_mul_sixth": [
        n("Add", ["x", "three"], ["a"]),
        n("Clip", ["a", "zero", "six"], ["c"]),
        n("Mul", ["c", "x"], ["p"]),
        n("Mul", ["sixth", "p"], ["y"]),
    ],
}


@pytest.mark.parametrize("form", list(_HARD_SWISH))
def test_hard_swish_forms_become_hard_swish(form):
    m = model(_HARD_SWISH[form], {"x": ["N", 6]}, ["y"], _HS_CONSTS)
    graph = assert_matches_ort(m, _x(4, 6, scale=4.0), optimize=True, rtol=1e-6, atol=1e-6)
    if form == "clip_mul_sixth":  # every target runs Add+clip and Mul: left alone
        assert _ops(graph) == ["Add", "Mul", "Mul"]
    else:
        assert _ops(graph) == ["HardSwish"] and graph.nodes[0].outputs == ("y",)


def test_hard_swish_lookalikes_are_left_alone():
    consts = {**_HS_CONSTS, "five": np.float32(5)}
    nodes = [
        n("Add", ["x", "three"], ["a"]),
        n("Clip", ["a", "zero", "five"], ["c"]),  # Clip to 5: not hard-swish
        n("Mul", ["x", "c"], ["p"]),
        n("Div", ["p", "six"], ["y"]),
    ]
    graph = fuse_hard_swish(load_onnx(model(nodes, {"x": [2, 6]}, ["y"], consts)))
    assert _ops(graph) == ["Add", "Clip", "Mul", "Div"]
    nodes[1] = n("Clip", ["a", "zero", "six"], ["c"])  # c also read elsewhere: must stay
    m = model([*nodes, n("Relu", ["c"], ["r"])], {"x": [2, 6]}, ["y", "r"], consts)
    assert "HardSwish" not in _ops(fuse_hard_swish(load_onnx(m)))


# -- end to end: a transformer MLP block on every backend ------------------------------------

C, HIDDEN, T = 16, 32, 8
EXACT_LINEAR = ("xs3", "tflite", "onednn")


def _mlp_block(activation: str):
    """Linear -> activation -> Linear on (N, T, C), as PyTorch exports nn.Linear on 3-D input."""
    nodes = [
        n("MatMul", ["x", "w1"], ["h1"]),
        n("Add", ["h1", "b1"], ["h1b"]),
        n(activation, ["h1b"], ["g"]),
        n("MatMul", ["g", "w2"], ["h2"]),
        n("Add", ["b2", "h2"], ["y"]),
    ]
    inits = {
        "w1": weights((C, HIDDEN), 1),
        "b1": weights((HIDDEN,), 2, scale=0.1),
        "w2": weights((HIDDEN, C), 3),
        "b2": weights((C,), 4, scale=0.1),
    }
    return model(nodes, {"x": ["N", T, C]}, ["y"], inits, opset=20)


@pytest.mark.parametrize("activation", ["Gelu", "Relu"])
@pytest.mark.parametrize("backend", known_backends())
def test_transformer_mlp_linears_compile_as_fully_connected(backend, activation):
    m = _mlp_block(activation)
    graph = assert_matches_ort(m, _x(2, T, C), optimize=True, rtol=1e-5, atol=1e-5)
    gemms = [node.name for node in graph.nodes if node.op_type == "Gemm"]
    assert len(gemms) == 2 and "MatMul" not in _ops(graph) and "Add" not in _ops(graph)
    calib = np.random.default_rng(1).normal(size=(16, T, C)).astype(np.float32)
    try:
        program = quantemu.compile(m, backend, calib=calib)
    except (UnsupportedError, InvalidInputError) as exc:
        # only the activation may be missing on a target, never the linear layers
        assert activation == "Gelu" and "Gelu" in str(exc), str(exc)
        assert "Gemm" not in str(exc).split("supported")[0] and "MatMul '" not in str(exc)
        return
    assert program.run(_x(2, T, C)["x"]) is not None
    layers = {layer.name: layer for layer in program.lowered.layers}
    assert set(gemms) <= set(layers)
    if backend in EXACT_LINEAR or (backend == "nvdla" and activation == "Relu"):
        assert all(layers[g].exact for g in gemms), [(g, layers[g].note) for g in gemms]
