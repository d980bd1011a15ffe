"""The IR: frozen values, structure checks, shape inference with a symbolic batch, summary."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper
from onnx_models import model, weights

from quantemu.data import demo_model_path
from quantemu.errors import InvalidInputError
from quantemu.graph import Attrs, Graph, Node, TensorInfo, load_onnx


def _graph(nodes, outputs=("y",), inits=None):
    return Graph("g", (TensorInfo("x", ("N", 3, 4, 4)),), outputs, nodes, inits or {})


def test_values_are_frozen_and_read_only():
    graph = load_onnx(demo_model_path())
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.nodes = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        graph.initializers["x"] = np.zeros(1)  # type: ignore[index]
    weight = next(iter(graph.initializers.values()))
    with pytest.raises(ValueError, match="read-only"):
        weight[...] = 0
    node = graph.nodes[0]
    assert isinstance(node.attrs, Attrs) and hash(node) == hash(dataclasses.replace(node))
    with pytest.raises(TypeError):
        node.attrs["group"] = 2  # type: ignore[index]


def test_conv_attributes_are_normalized():
    graph = load_onnx(demo_model_path())
    attrs = graph.node("/depthwise/Conv").attrs
    assert dict(attrs) == {
        "kernel_shape": (3, 3),
        "strides": (1, 1),
        "dilations": (1, 1),
        "pads": (1, 1, 1, 1),
        "group": 16,
    }


def test_symbolic_batch_flows_through_shape_inference():
    nodes = [
        Node("f", "Flatten", ("x",), ("f",), {"axis": 1}),
        Node("r", "Reshape", ("x",), ("r",), {"shape": (-1, 16), "allowzero": 0}),
        Node("r2", "Reshape", ("x",), ("r2",), {"shape": (0, -1, 2), "allowzero": 0}),
        Node("t", "Transpose", ("x",), ("y",), {"perm": (0, 2, 3, 1)}),
        # A flattened batch comes back: (N*3, 16) -> (N, 3, 16).
        Node("u", "Reshape", ("r",), ("u",), {"shape": (-1, 3, 16), "allowzero": 0}),
    ]
    graph = _graph(nodes)
    assert graph.tensors["f"].shape == ("N", 48)
    assert graph.tensors["r"].shape == ("N*3", 16)  # -1 absorbs N * 3
    assert graph.tensors["r2"].shape == ("N", 24, 2)
    assert graph.tensors["y"].shape == ("N", 4, 4, 3)
    assert graph.tensors["u"].shape == ("N", 3, 16)
    bound = graph.with_batch(5)
    assert bound.tensors["r"].shape == (15, 16) and bound.inputs[0].shape == (5, 3, 4, 4)
    with pytest.raises(InvalidInputError, match="batch must be a positive integer"):
        graph.with_batch(0)


def test_structure_errors():
    relu = Node("a", "Relu", ("x",), ("a",))
    with pytest.raises(InvalidInputError, match="two nodes are named 'a'"):
        _graph([relu, Node("a", "Relu", ("a",), ("y",))])
    with pytest.raises(InvalidInputError, match=r"Relu 'b' reads 'zz'.*dangling input"):
        _graph([Node("b", "Relu", ("zz",), ("y",))])
    with pytest.raises(InvalidInputError, match="writes 'x', which is already defined"):
        _graph([Node("b", "Relu", ("x",), ("x",))], outputs=("x",))
    with pytest.raises(InvalidInputError, match="graph output 'y' is not produced"):
        _graph([relu])
    with pytest.raises(InvalidInputError, match="takes 2 inputs, got 1"):
        _graph([Node("m", "Add", ("x",), ("y",))])
    with pytest.raises(InvalidInputError, match="dtype int64; the float graph computes"):
        _graph([Node("m", "Add", ("x", "k"), ("y",))], inits={"k": np.ones(4, np.int64)})


def test_navigation():
    graph = load_onnx(demo_model_path())
    conv = graph.node("/stem/Conv")
    assert graph.producer(conv.outputs[0]) is conv
    assert [n.op_type for n in graph.consumers(conv.outputs[0])] == ["Relu"]
    assert graph.param_count(conv) == 16 * 9 + 16
    with pytest.raises(InvalidInputError, match="has no node named 'nope'"):
        graph.node("nope")


def test_summary_lists_every_node_with_shapes_and_totals():
    graph = load_onnx(demo_model_path())
    text = graph.summary()
    assert "batchx16x8x8" in text and "16x1x3x3" in text
    assert "13 nodes" in text and "6,522" in text and "109,824" in text
    assert "inputs:  input batchx1x8x8 float32" in text


def test_fused_activation_labels():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"]),
    ]
    inits = {
        "w": weights((2, 3, 1, 1)),
        "lo": np.array(0, np.float32),
        "hi": np.array(6, np.float32),
    }
    from quantemu.graph import optimize

    graph = optimize(load_onnx(model(nodes, {"x": [1, 3, 4, 4]}, ["y"], inits)))
    assert "Conv+clip[0,6]" in graph.summary()
