"""Element-wise operators: activations and broadcasting arithmetic, plus fused activations.

A fused activation (see :mod:`quantemu.graph.passes`) is recorded on its producer as the
attribute ``activation`` with one of the values of :data:`FUSABLE`, and its parameters:

- ``"relu"``: ``max(x, 0)``;
- ``"clip"``: ``min(max(x, activation_min), activation_max)`` (ReLU6 is ``clip`` 0..6);
- ``"leaky_relu"``: ``x if x >= 0 else activation_alpha * x``.

These are the piecewise-linear activations every integer target applies in its output stage
(a clamp or a per-tensor scale on the negative side), which is why only they are fused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import broadcast, data, fail, register

#: The values the ``activation`` attribute of a fused producer can take.
FUSABLE = ("relu", "clip", "leaky_relu")


def apply_activation(y: np.ndarray, attrs: Attrs) -> np.ndarray:
    """Apply the fused activation recorded in ``attrs`` (if any) to ``y``, in place."""
    kind = attrs.get("activation")
    if kind is None:
        return y
    if kind == "relu":
        return np.maximum(y, 0, out=y)
    if kind == "clip":
        return np.clip(y, attrs["activation_min"], attrs["activation_max"], out=y)
    if kind == "leaky_relu":
        return _leaky(y, attrs["activation_alpha"])
    raise ValueError(f"unknown fused activation {kind!r}")  # the IR never holds one


def _leaky(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x < 0, x * np.float32(alpha), x).astype(np.float32, copy=False)


def _same_shape(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [data(node, infos, 0).shape]


def _unary(fn):
    def run(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        with np.errstate(over="ignore", under="ignore"):
            return [np.asarray(fn(inputs[0], attrs), dtype=np.float32)]

    return run


def _sigmoid(x: np.ndarray, _attrs: Attrs) -> np.ndarray:
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _hard_sigmoid(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    y = x * np.float32(attrs["alpha"]) + np.float32(attrs["beta"])
    return np.clip(y, 0, 1, out=y)


def _hard_swish(x: np.ndarray, _attrs: Attrs) -> np.ndarray:
    # ONNX HardSwish: x * HardSigmoid(x) with alpha = 1/6, beta = 0.5.
    gate = x * np.float32(1 / 6) + np.float32(0.5)
    return x * np.clip(gate, 0, 1, out=gate)


register("Relu", _same_shape, _unary(lambda x, a: np.maximum(x, 0)))
register("Sigmoid", _same_shape, _unary(_sigmoid))
register("Tanh", _same_shape, _unary(lambda x, a: np.tanh(x)))
register("HardSigmoid", _same_shape, _unary(_hard_sigmoid))
register("HardSwish", _same_shape, _unary(_hard_swish))
register("LeakyRelu", _same_shape, _unary(lambda x, a: _leaky(x, a["alpha"])))
register("Clip", _same_shape, _unary(lambda x, a: np.clip(x, a["min"], a["max"])))
register("Identity", _same_shape, lambda attrs, inputs: [inputs[0]])
register("Dropout", _same_shape, lambda attrs, inputs: [inputs[0]])


def _infer_prelu(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x, slope = data(node, infos, 0), data(node, infos, 1)
    if broadcast(node, [x.shape, slope.shape]) != x.shape or slope.rank > x.rank:
        raise fail(
            node, f"slope {slope.name!r} {slope.shape} does not broadcast to the input {x.shape}"
        )
    return [x.shape]


def _run_prelu(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, slope = inputs[0], inputs[1]
    return [np.where(x < 0, x * slope, x).astype(np.float32, copy=False)]


register("PRelu", _infer_prelu, _run_prelu, inputs=2)


def _infer_binary(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [broadcast(node, [data(node, infos, 0).shape, data(node, infos, 1).shape])]


def _binary(fn):
    def run(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = np.asarray(fn(inputs[0], inputs[1]), dtype=np.float32)
        return [apply_activation(y, attrs)]

    return run


register("Add", _infer_binary, _binary(np.add), inputs=2)
register("Sub", _infer_binary, _binary(np.subtract), inputs=2)
register("Mul", _infer_binary, _binary(np.multiply), inputs=2)
register("Div", _infer_binary, _binary(np.divide), inputs=2)
