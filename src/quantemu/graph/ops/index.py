"""Gather, Slice, Expand (pure data movements: backends run these kernels on their codes, so
they keep the input's dtype) and Where with a constant condition.

Normalized attributes:

* Gather: ``axis`` (non-negative), ``indices`` (flat, non-negative) and ``indices_shape``.
* Slice: ``axes`` (non-negative, distinct), ``starts``, ``ends``, ``steps`` (one per axis, as the
  model gives them; clamping is ONNX's and is done against the actual size, so a symbolic axis
  slices right once its size is bound).
* Expand: ``shape`` (the constant target, broadcast both ways as ONNX does).
* Where: ``condition`` (flat 0/1) and ``condition_shape``; inputs X and Y.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import UNKNOWN_DIM, Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import broadcast, data, fail, known, register


def _infer_gather(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axis = node.attrs["axis"]
    if axis >= x.rank:
        raise fail(node, f"axis {axis} is out of range for input shape {x.shape}")
    dim = x.shape[axis]
    bad = [i for i in node.attrs["indices"] if known(dim) and not 0 <= i < dim]
    if bad:
        raise fail(node, f"indices {bad} are out of range for axis {axis} of shape {x.shape}")
    return [(*x.shape[:axis], *node.attrs["indices_shape"], *x.shape[axis + 1 :])]


def _run_gather(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    indices = np.array(attrs["indices"], dtype=np.int64).reshape(attrs["indices_shape"])
    return [np.take(inputs[0], indices, axis=attrs["axis"])]


def slice_bounds(dim: int, start: int, end: int, step: int) -> slice:
    """ONNX Slice's clamping of ``start``/``end`` for an axis of size ``dim``, as a slice."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    # end == -1 with a negative step means "through index 0", which Python spells None
    return slice(start, None if end < 0 else end, step)


def _slice_parts(attrs: Attrs):
    return zip(attrs["axes"], attrs["starts"], attrs["ends"], attrs["steps"], strict=True)


def _infer_slice(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    out = list(x.shape)
    for axis, start, end, step in _slice_parts(node.attrs):
        if axis >= x.rank:
            raise fail(node, f"axis {axis} is out of range for input shape {x.shape}")
        dim = x.shape[axis]
        out[axis] = (
            len(range(dim)[slice_bounds(dim, start, end, step)]) if known(dim) else (UNKNOWN_DIM)
        )
    return [tuple(out)]


def _run_slice(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    index = [slice(None)] * x.ndim
    for axis, start, end, step in _slice_parts(attrs):
        index[axis] = slice_bounds(x.shape[axis], start, end, step)
    return [np.ascontiguousarray(x[tuple(index)])]


def _infer_expand(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    return [broadcast(node, [x.shape, tuple(node.attrs["shape"])])]


def _run_expand(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    target = np.broadcast_shapes(x.shape, tuple(attrs["shape"]))
    return [np.array(np.broadcast_to(x, target))]


def _infer_where(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x, y = data(node, infos, 0), data(node, infos, 1)
    return [broadcast(node, [tuple(node.attrs["condition_shape"]), x.shape, y.shape])]


def _run_where(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    condition = np.array(attrs["condition"], dtype=bool).reshape(attrs["condition_shape"])
    return [np.where(condition, inputs[0], inputs[1])]


register("Gather", _infer_gather, _run_gather)
register("Slice", _infer_slice, _run_slice)
register("Expand", _infer_expand, _run_expand)
register("Where", _infer_where, _run_where, inputs=2)
