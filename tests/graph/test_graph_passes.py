"""Graph passes: BN folding, activation fusion, constant folding, identity removal."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, weights

from quantemu.errors import InvalidInputError
from quantemu.graph import DEFAULT_PIPELINE, PASSES, load_onnx, optimize, run_passes

pytest.importorskip("onnxruntime", reason=ORT_REASON)

X = [2, 4, 7, 9]
RNG = np.random.default_rng(5)


def _feeds(shape=X):
    return {"x": RNG.normal(size=shape).astype(np.float32)}


def _bn_params(c: int, prefix: str = "bn") -> dict[str, np.ndarray]:
    return {
        f"{prefix}_s": weights((c,), 11) + 1,
        f"{prefix}_b": weights((c,), 12),
        f"{prefix}_m": weights((c,), 13),
        f"{prefix}_v": np.abs(weights((c,), 14)) + 0.5,
    }


def _bn(x: str, y: str, prefix: str = "bn"):
    names = [f"{prefix}_{k}" for k in "sbmv"]
    return helper.make_node("BatchNormalization", [x, *names], [y], epsilon=1e-3, name=prefix)


def _ops(graph):
    return [n.op_type for n in graph.nodes]


@pytest.mark.parametrize("bias", [True, False])
def test_fold_batchnorm_into_conv(bias):
    inits = {"w": weights((6, 4, 3, 3)), **_bn_params(6)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = weights((6,), 3)
        inputs.append("b")
    nodes = [helper.make_node("Conv", inputs, ["c"], pads=[1, 1, 1, 1]), _bn("c", "y")]
    m = model(nodes, {"x": X}, ["y"], inits)
    graph = assert_matches_ort(m, _feeds(), optimize=True, rtol=1e-5, atol=2e-5)
    assert _ops(graph) == ["Conv"] and graph.nodes[0].outputs == ("y",)


def test_fold_batchnorm_into_grouped_conv_transpose():
    inits = {"w": weights((4, 3, 3, 3)), **_bn_params(6)}
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w"], ["c"], group=2, strides=[2, 2]),
        _bn("c", "y"),
    ]
    graph = assert_matches_ort(
        model(nodes, {"x": X}, ["y"], inits), _feeds(), optimize=True, atol=2e-5
    )
    assert _ops(graph) == ["ConvTranspose"]


@pytest.mark.parametrize("trans_b", [0, 1])
def test_fold_batchnorm_into_gemm_with_alpha_beta(trans_b):
    w = weights((5, 8)) if trans_b else weights((8, 5))
    inits = {"w": w, "c": weights((5,), 4), **_bn_params(5)}
    nodes = [
        helper.make_node("Gemm", ["x", "w", "c"], ["g"], transB=trans_b, alpha=0.7, beta=1.3),
        _bn("g", "y"),
    ]
    graph = assert_matches_ort(
        model(nodes, {"x": [3, 8]}, ["y"], inits), _feeds((3, 8)), optimize=True, atol=2e-5
    )
    assert _ops(graph) == ["Gemm"] and graph.nodes[0].attrs["alpha"] == 1.0


def test_batchnorm_not_folded_when_the_conv_output_is_shared():
    inits = {"w": weights((4, 4, 1, 1)), **_bn_params(4)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        _bn("c", "n"),
        helper.make_node("Add", ["n", "c"], ["y"]),
    ]
    graph = assert_matches_ort(model(nodes, {"x": X}, ["y"], inits), _feeds(), optimize=True)
    assert "BatchNormalization" in _ops(graph)


@pytest.mark.parametrize(
    ("producer", "activation", "expected"),
    [
        ("Conv", helper.make_node("Relu", ["p"], ["y"]), {"activation": "relu"}),
        (
            "Conv",
            helper.make_node("Clip", ["p", "lo", "hi"], ["y"]),
            {"activation": "clip", "activation_min": 0.0, "activation_max": 6.0},
        ),
        (
            "Add",
            helper.make_node("LeakyRelu", ["p"], ["y"], alpha=0.25),
            {"activation": "leaky_relu", "activation_alpha": 0.25},
        ),
        ("Gemm", helper.make_node("Relu", ["p"], ["y"]), {"activation": "relu"}),
        ("MatMul", helper.make_node("Clip", ["p", "lo", "hi"], ["y"]), {"activation": "clip"}),
    ],
)
def test_fuse_activation(producer, activation, expected):
    inits = {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    shape = X
    if producer == "Conv":
        inits["w"] = weights((4, 4, 3, 3), scale=1.0)
        node = helper.make_node("Conv", ["x", "w"], ["p"], pads=[1, 1, 1, 1])
    elif producer == "Add":
        inits["w"] = weights((4, 1, 1))
        node = helper.make_node("Add", ["x", "w"], ["p"])
    else:
        shape = [3, 8]
        inits["w"] = weights((8, 5), scale=2.0)
        node = helper.make_node(producer, ["x", "w"], ["p"])
    m = model([node, activation], {"x": shape}, ["y"], inits)
    graph = assert_matches_ort(
        m, {"x": RNG.normal(size=shape).astype(np.float32) * 3}, optimize=True
    )
    assert len(graph.nodes) == 1 and graph.nodes[0].outputs == ("y",)
    for key, value in expected.items():
        assert graph.nodes[0].attrs[key] == value


def test_no_fusion_into_a_graph_output_or_a_shared_tensor():
    inits = {"w": weights((4, 4, 1, 1))}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["s"]),
        helper.make_node("Relu", ["r"], ["t"]),
    ]
    graph = optimize(load_onnx(model(nodes, {"x": X}, ["y", "c", "s", "t"], inits)))
    assert _ops(graph) == ["Conv", "Relu", "Relu", "Sigmoid", "Relu"]


def test_remove_identity_and_dropout_keeps_output_names():
    nodes = [
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Dropout", ["b"], ["c"]),
        helper.make_node("Identity", ["c"], ["y"]),
    ]
    m = model(nodes, {"x": X}, ["y"], opset=11)
    graph = assert_matches_ort(m, _feeds(), optimize=True)
    assert _ops(graph) == ["Relu"] and graph.nodes[0].inputs == ("x",)
    assert graph.nodes[0].outputs == ("y",)


def test_identity_from_input_to_output_is_kept():
    graph = optimize(
        load_onnx(model([helper.make_node("Identity", ["x"], ["y"])], {"x": X}, ["y"]))
    )
    assert _ops(graph) == ["Identity"]


def test_fold_constants():
    inits = {
        "a": weights((12, 5)),
        "k": np.array(2.0, np.float32),
        "shape": np.array([4, 15], np.int64),
    }
    nodes = [
        helper.make_node("Mul", ["a", "k"], ["a2"]),
        helper.make_node("Reshape", ["a2", "shape"], ["w"]),
        helper.make_node("Transpose", ["w"], ["wt"]),
        helper.make_node("MatMul", ["x", "wt"], ["y"]),
    ]
    graph = assert_matches_ort(
        model(nodes, {"x": [3, 15]}, ["y"], inits),
        {"x": RNG.normal(size=(3, 15)).astype(np.float32)},
        optimize=True,
    )
    assert _ops(graph) == ["MatMul"] and graph.initializers["wt"].shape == (15, 4)
    assert set(graph.initializers) == {"wt"}  # the inputs of folded nodes are dropped


def test_run_passes_reports_each_pass_and_rejects_unknown_names():
    graph = load_onnx(model([helper.make_node("Relu", ["x"], ["y"])], {"x": X}, ["y"]))
    seen = []
    run_passes(graph, on_pass=lambda name, g: seen.append(name))
    assert tuple(seen) == DEFAULT_PIPELINE == tuple(PASSES)
    assert DEFAULT_PIPELINE == (
        "relax_batch",
        "remove_identity",
        "fold_constants",
        "reduce_mean_to_pool",
        "fuse_matmul_add",
        "div_by_constant",
        "fuse_hard_swish",
        "sink_squeeze",
        "fold_batchnorm",
        "fuse_activation",
    )
    with pytest.raises(
        InvalidInputError, match="unknown pass 'nope'; passes: relax_batch, remove_identity"
    ):
        run_passes(graph, ["nope"])


def test_relax_batch_makes_a_fixed_batch_of_one_symbolic():
    from quantemu.graph.passes_shape import fixed_batch, relax_batch

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("ReduceMean", ["c"], ["y"], axes=[2, 3], keepdims=0),
    ]
    proto = model(nodes, {"x": [1, 3, 5, 5]}, ["y"], {"w": np.ones((4, 3, 1, 1), np.float32)})
    graph = load_onnx(proto)
    assert fixed_batch(graph) == 1
    relaxed = relax_batch(graph)
    assert relaxed.inputs[0].shape == ("batch", 3, 5, 5) and fixed_batch(relaxed) is None
    out = optimize(graph)
    assert [n.op_type for n in out.nodes] == ["Conv", "GlobalAveragePool", "Flatten"]
    assert out.run_float(np.ones((3, 3, 5, 5), np.float32))["y"].shape == (3, 4)


def test_relax_batch_keeps_a_batch_a_reshape_folds_away():
    from quantemu.graph.passes_shape import relax_batch

    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]  # (3, 25): drops the batch
    proto = model(nodes, {"x": [1, 3, 5, 5]}, ["y"], {"s": np.array([3, 25], np.int64)})
    graph = load_onnx(proto)
    assert relax_batch(graph) is graph
