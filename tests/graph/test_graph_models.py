"""Whole models against onnxruntime: the ResNet-18 shape, the demo model, multi-node graphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, run_ort, weights

from quantemu.data import demo_dataset, demo_info, demo_model_path
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18

ort = pytest.importorskip("onnxruntime", reason=ORT_REASON)


@pytest.mark.parametrize("batchnorm", [True, False])
def test_resnet18_shape_matches_ort_before_and_after_passes(batchnorm):
    m = resnet18(batch="N", size=32, width=8, num_classes=10, batchnorm=batchnorm)
    x = np.random.default_rng(0).normal(size=(3, 3, 32, 32)).astype(np.float32)
    graph = assert_matches_ort(m, {"input": x}, rtol=1e-4, atol=1e-4)
    assert graph.tensors["logits"].shape == ("N", 10)
    optimized = assert_matches_ort(m, {"input": x}, rtol=1e-4, atol=1e-4, optimize=True)
    ops = [n.op_type for n in optimized.nodes]
    assert "BatchNormalization" not in ops and "Relu" not in ops
    assert len(optimized.nodes) < len(graph.nodes)


def test_demo_model_matches_ort():
    x, _ = demo_dataset("test")
    assert_matches_ort(onnx.load(demo_model_path()), {"input": x[:50]}, optimize=True)


def test_demo_model_float_accuracy_is_exactly_the_recorded_one():
    info = demo_info()
    x, y = demo_dataset("test")
    graph = optimize(load_onnx(demo_model_path()))
    correct = int((graph.run_float(x)["logits"].argmax(axis=1) == y).sum())
    assert correct == info["correct"]["quantemu"]
    assert correct / len(y) == info["float_accuracy"]
    assert len(y) == info["test_split"]["samples"]


def test_constant_nodes_and_chained_ops():
    """Constant nodes feed data and attribute inputs; Clip's bounds come from Constants."""
    nodes = [
        helper.make_node(
            "Constant", [], ["k"], value=helper.make_tensor("k", 1, [3, 1, 1], [0.5, -1.0, 2.0])
        ),
        helper.make_node("Constant", [], ["lo"], value_float=-0.25),
        helper.make_node("Constant", [], ["hi"], value_float=1.5),
        helper.make_node("Constant", [], ["shape"], value_ints=[0, -1]),
        helper.make_node("Mul", ["x", "k"], ["a"]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["b"]),
        helper.make_node("Reshape", ["b", "shape"], ["c"]),
        helper.make_node("MatMul", ["c", "w"], ["d"]),
        helper.make_node("Softmax", ["d"], ["y"], axis=-1),
    ]
    m = model(nodes, {"x": ["batch", 3, 4, 4]}, ["y"], {"w": weights((48, 7))}, opset=17)
    x = np.random.default_rng(1).normal(size=(5, 3, 4, 4)).astype(np.float32)
    graph = assert_matches_ort(m, {"x": x})
    assert graph.tensors["c"].shape == ("batch", 48)
    assert graph.node("Clip_5").attrs["min"] == -0.25  # unnamed nodes get op_index names


def test_intermediates_are_per_layer_references():
    m = resnet18(size=32, width=8, num_classes=10, batchnorm=False)
    x = np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype(np.float32)
    values = load_onnx(m).run_float(x, intermediates=True)
    node_outputs = [n.output[0] for n in m.graph.node]
    assert set(node_outputs) <= set(values)
    # The conv1 output against onnxruntime with that tensor exposed as an extra output.
    m.graph.output.append(helper.make_tensor_value_info("conv1", 1, None))
    theirs = run_ort(m, {"input": x})[1]
    np.testing.assert_allclose(values["conv1"], theirs, rtol=1e-5, atol=1e-5)
