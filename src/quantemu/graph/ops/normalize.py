"""BatchNormalization (inference), LRN, Softmax and ReduceMean.

Normalized attributes: BatchNormalization ``epsilon``; LRN ``size``, ``alpha``, ``beta``,
``bias``; Softmax ``axis`` (non-negative) and ``coerce_2d`` (1 for the opset < 13 semantics, which
flatten the input to 2-D at ``axis`` first; 0 otherwise); ReduceMean ``axes`` (sorted,
non-negative, never empty) and ``keepdims``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register


def _infer_batchnorm(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    if x.rank < 2:
        raise fail(node, f"input must have rank >= 2 (N, C, ...), got {x.shape}")
    for i, role in enumerate(("scale", "B", "mean", "var"), start=1):
        p = data(node, infos, i)
        if p.rank != 1 or (known(p.shape[0]) and known(x.shape[1]) and p.shape[0] != x.shape[1]):
            raise fail(node, f"{role} {p.name!r} has shape {p.shape}, expected ({x.shape[1]},)")
    return [x.shape]


def batchnorm_affine(scale, bias, mean, var, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel ``(multiplier, offset)`` that inference-mode batch norm applies.

    ``y = x * multiplier + offset`` with ``multiplier = scale / sqrt(var + eps)`` and
    ``offset = bias - mean * multiplier``, in float32 (onnxruntime's order).
    """
    multiplier = (scale / np.sqrt(var + np.float32(epsilon))).astype(np.float32)
    offset = (bias - mean * multiplier).astype(np.float32)
    return multiplier, offset


def _run_batchnorm(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, scale, bias, mean, var = inputs[:5]
    multiplier, offset = batchnorm_affine(scale, bias, mean, var, attrs["epsilon"])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return [x * multiplier.reshape(shape) + offset.reshape(shape)]


def _same_shape(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [data(node, infos, 0).shape]


def _infer_lrn(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    if x.rank < 3:
        raise fail(node, f"input must have rank >= 3 (N, C, spatial...), got {x.shape}")
    return [x.shape]


def _run_lrn(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    size = attrs["size"]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    squares = x.astype(np.float32) ** 2
    # Window sums over channels [c - before, c + after]: a loop over the `size` taps (a handful),
    # each vectorized over all pixels and channels; a cumulative-sum difference would be as fast
    # but loses float32 precision over many channels.
    widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    padded = np.pad(squares, widths)
    c = x.shape[1]
    window = np.zeros_like(squares)
    for tap in range(size):
        window += padded[:, tap : tap + c]
    scale = np.float32(attrs["bias"]) + np.float32(attrs["alpha"] / size) * window
    return [(x / scale ** np.float32(attrs["beta"])).astype(np.float32)]


def _run_softmax(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs["axis"]
    shape = x.shape
    if attrs["coerce_2d"]:
        x = x.reshape(int(np.prod(shape[:axis])), -1)
        axis = 1
    # ``beta`` (TFLite's SOFTMAX; ONNX has none, so 1.0 when absent) scales the logits.
    beta = np.float32(attrs.get("beta", 1.0))
    e = np.exp(beta * (x - x.max(axis=axis, keepdims=True)))
    y = e / e.sum(axis=axis, keepdims=True)
    return [y.reshape(shape).astype(np.float32, copy=False)]


def _infer_softmax(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    if node.attrs["axis"] >= x.rank:
        raise fail(node, f"axis {node.attrs['axis']} is out of range for input {x.shape}")
    return [x.shape]


def _infer_reduce_mean(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axes = node.attrs["axes"]
    if any(a >= x.rank for a in axes):
        raise fail(node, f"axes {axes} are out of range for input {x.shape}")
    if node.attrs["keepdims"]:
        return [tuple(1 if i in axes else d for i, d in enumerate(x.shape))]
    return [tuple(d for i, d in enumerate(x.shape) if i not in axes)]


def _run_reduce_mean(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    y = np.mean(inputs[0], axis=attrs["axes"], keepdims=bool(attrs["keepdims"]), dtype=np.float32)
    return [np.asarray(y, dtype=np.float32)]


register("BatchNormalization", _infer_batchnorm, _run_batchnorm, inputs=5)
register("LRN", _infer_lrn, _run_lrn)
register("Softmax", _infer_softmax, _run_softmax)
register("ReduceMean", _infer_reduce_mean, _run_reduce_mean)
