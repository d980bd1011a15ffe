"""Small multi-input ONNX models for the feeds tests, built with onnx.helper.

``two_branch``: ``y = (relu(a @ w1) + b * 0.5) @ w2``: ``a`` is batched ``(N, 8)``, ``b`` is
``(6,)`` without a batch (it applies to every sample) or ``(N, 6)`` with ``batched_b``; ``y`` is
a 3-class output. ``state_on_axis1``: ``y = relu(a @ w1) + mean_layers(s)`` with a recurrent-style
state ``s`` of shape ``(2, N, 6)`` (the batch on axis 1). ``scalar_gain``: a scalar input that
applies to every sample.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(nodes, inputs, weights, path) -> str:
    graph = helper.make_graph(
        nodes,
        "multi_input",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3 if "w2" in weights else 6])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "w1": rng.normal(size=(8, 6)).astype(np.float32),
        "w2": rng.normal(size=(6, 3)).astype(np.float32),
        "half": np.full((6,), 0.5, np.float32),
    }


def two_branch(path, *, batched_b: bool = False) -> str:
    """The two-branch model (module docstring), saved to ``path``."""
    nodes = [
        helper.make_node("MatMul", ["a", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Mul", ["b", "half"], ["bs"], name="scale"),
        helper.make_node("Add", ["r", "bs"], ["sum"], name="add"),
        helper.make_node("MatMul", ["sum", "w2"], ["y"], name="fc2"),
    ]
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 6] if batched_b else [6]),
    ]
    return _save(nodes, inputs, _weights(), path)


def state_on_axis1(path) -> str:
    """The model with a ``(2, N, 6)`` state input (module docstring), saved to ``path``."""
    weights = _weights()
    del weights["w2"]
    nodes = [
        helper.make_node("MatMul", ["a", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("ReduceMean", ["s"], ["ss"], name="layers", axes=[0], keepdims=0),
        helper.make_node("Add", ["r", "ss"], ["y"], name="add"),
    ]
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, "N", 6]),
    ]
    return _save(nodes, inputs, weights, path)


def feeds(samples: int, *, batched_b: bool = False, seed: int = 1) -> dict[str, np.ndarray]:
    """Float feeds for :func:`two_branch`."""
    rng = np.random.default_rng(seed)
    b_shape = (samples, 6) if batched_b else (6,)
    return {
        "a": rng.normal(size=(samples, 8)).astype(np.float32),
        "b": rng.normal(size=b_shape).astype(np.float32),
    }


def scalar_gain(path) -> str:
    """``y = relu(a @ w1) * gain`` with a scalar input ``gain`` (no batch), saved to ``path``."""
    weights = {"w1": _weights()["w1"]}
    nodes = [
        helper.make_node("MatMul", ["a", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "gain"], ["y"], name="gain_mul"),
    ]
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8]),
        helper.make_tensor_value_info("gain", TensorProto.FLOAT, []),
    ]
    return _save(nodes, inputs, weights, path)
