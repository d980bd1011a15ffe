"""Layout operators: Flatten, Reshape, Transpose, Concat, Pad and BorderPad.

Normalized attributes: Flatten ``axis`` (non-negative); Reshape ``shape`` (the ONNX shape tuple,
with 0 = copy and -1 = infer unless ``allowzero``) and ``allowzero``; Transpose ``perm``; Concat
``axis`` (non-negative); Pad ``pads`` (ONNX order: all begins, then all ends), ``mode``
(``"constant"``) and ``value``; BorderPad ``pads`` and ``mode`` (``"reflect"`` | ``"edge"``).

ONNX's ``Pad`` with mode ``reflect`` or ``edge`` copies border values instead of writing a
constant. It is its own IR operator, ``BorderPad``, because targets run it differently (TFLite
has MIRROR_PAD for reflect and nothing for edge) or not at all: a backend whose rule knows only
the constant ``Pad`` then refuses it (or falls back) instead of padding with a constant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import UNKNOWN_DIM, Attrs, Dim, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import (
    data,
    fail,
    known,
    mul_dims,
    register,
    same_dim,
    scaled_dim,
    split_dim,
)


def _infer_flatten(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axis = node.attrs["axis"]
    if axis > x.rank:
        raise fail(node, f"axis {axis} is out of range for input shape {x.shape}")
    return [(mul_dims(x.shape[:axis]), mul_dims(x.shape[axis:]))]


def _run_flatten(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs["axis"]
    return [x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))]


def reshape_target(node: Node, in_shape: Shape, shape: Sequence[int], allowzero: int) -> Shape:
    """Resolve Reshape's 0 (copy) and -1 (infer) entries against ``in_shape``."""
    if list(shape).count(-1) > 1:
        raise fail(node, f"shape {tuple(shape)} has more than one -1")
    out: list[Dim] = []
    for i, s in enumerate(shape):
        if s == 0 and not allowzero:
            if i >= len(in_shape):
                raise fail(node, f"shape {tuple(shape)} copies dimension {i} (0) of {in_shape}")
            out.append(in_shape[i])
        elif s < -1:
            raise fail(node, f"shape {tuple(shape)} has a negative entry other than -1")
        else:
            out.append(s)
    if -1 not in shape:
        total_in, total_out = mul_dims(in_shape), mul_dims(out)
        if known(total_in) and known(total_out) and total_in != total_out:
            raise fail(node, f"cannot reshape {in_shape} ({total_in} elements) to {tuple(out)}")
        return tuple(out)
    rest = [d for d, s in zip(out, shape, strict=True) if s != -1]
    out[list(shape).index(-1)] = _infer_minus_one(node, in_shape, rest, shape)
    return tuple(out)


def _infer_minus_one(node: Node, in_shape: Shape, rest: list[Dim], shape) -> Dim:
    parts_in = [split_dim(d) for d in in_shape]
    parts_out = [split_dim(d) for d in rest]
    sym_in = Counter(s for s, _ in parts_in if s is not None)
    sym_out = Counter(s for s, _ in parts_out if s is not None)
    known_in = int(np.prod([f for _, f in parts_in], dtype=np.int64))
    known_out = int(np.prod([f for _, f in parts_out], dtype=np.int64))
    left = sym_in - sym_out
    if sym_out - sym_in or UNKNOWN_DIM in sym_in:
        return UNKNOWN_DIM
    if known_out == 0 or known_in % known_out:
        if not left:
            raise fail(node, f"cannot reshape {in_shape} to {tuple(shape)}")
        return UNKNOWN_DIM
    ratio = known_in // known_out
    if not left:
        return ratio
    if sum(left.values()) == 1:
        return scaled_dim(next(iter(left)), ratio)
    return UNKNOWN_DIM


def _infer_reshape(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    return [reshape_target(node, x.shape, node.attrs["shape"], node.attrs["allowzero"])]


def _run_reshape(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    target = [
        x.shape[i] if s == 0 and not attrs["allowzero"] else s for i, s in enumerate(attrs["shape"])
    ]
    return [x.reshape(target)]


def _infer_transpose(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    perm = node.attrs["perm"] or tuple(reversed(range(x.rank)))
    if sorted(perm) != list(range(x.rank)):
        raise fail(node, f"perm {perm} is not a permutation of the {x.rank} axes of {x.shape}")
    return [tuple(x.shape[p] for p in perm)]


def _run_transpose(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    return [np.transpose(x, attrs["perm"] or None)]


def _infer_concat(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    shapes = [data(node, infos, i).shape for i in range(len(infos))]
    axis = node.attrs["axis"]
    rank = len(shapes[0])
    if axis >= rank:
        raise fail(node, f"axis {axis} is out of range for rank {rank}")
    out = list(shapes[0])
    for shape in shapes[1:]:
        if len(shape) != rank:
            raise fail(node, f"inputs have different ranks: {shapes}")
        for i in range(rank):
            if i != axis:
                out[i] = same_dim(node, out[i], shape[i], f"inputs {shapes} differ on axis {i}")
    out[axis] = (
        sum(s[axis] for s in shapes) if all(known(s[axis]) for s in shapes) else (UNKNOWN_DIM)
    )
    return [tuple(out)]


def _run_concat(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return [np.concatenate(list(inputs), axis=attrs["axis"])]


def _infer_pad(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    pads = node.attrs["pads"]
    if len(pads) != 2 * x.rank or any(p < 0 for p in pads):
        raise fail(node, f"pads {pads} must be 2 x rank {x.rank} non-negative amounts")
    return [
        tuple(
            d + b + e if known(d) else d
            for d, b, e in zip(x.shape, pads, pads[x.rank :], strict=False)
        )
    ]


def _run_pad(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    pads = attrs["pads"]
    widths = list(zip(pads[: x.ndim], pads[x.ndim :], strict=True))
    return [np.pad(x, widths, constant_values=np.float32(attrs["value"]))]


def _infer_border_pad(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    (shape,) = _infer_pad(node, infos)
    x = data(node, infos, 0)
    for axis, (d, b, e) in enumerate(
        zip(x.shape, node.attrs["pads"], node.attrs["pads"][x.rank :], strict=False)
    ):
        if known(d):
            _check_border(node.attrs["mode"], axis, d, b, e, where=node)
    return [shape]


def _check_border(mode: str, axis: int, size: int, begin: int, end: int, *, where) -> None:
    """onnxruntime's limits: reflect mirrors without repeating the border, so it pads at most
    ``size - 1`` per side (NumPy would reflect again, a result no runtime gives); edge needs a
    border value to copy."""
    if mode == "reflect" and max(begin, end) > size - 1:
        raise InvalidInputError(
            f"{where}: mode 'reflect' pads axis {axis} of size {size} by ({begin}, {end}); "
            f"reflection pads at most size - 1 = {size - 1} per side"
        )
    if mode == "edge" and size == 0 and (begin or end):
        raise InvalidInputError(f"{where}: mode 'edge' cannot pad the empty axis {axis}")


def _run_border_pad(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    pads = attrs["pads"]
    widths = list(zip(pads[: x.ndim], pads[x.ndim :], strict=True))
    for axis, (b, e) in enumerate(widths):  # axes, not elements: a run-time size check
        _check_border(attrs["mode"], axis, x.shape[axis], b, e, where="BorderPad")
    # NumPy's "reflect" and "edge" are ONNX's (the border itself is not repeated by reflect).
    return [np.pad(x, widths, mode=attrs["mode"])]


register("Flatten", _infer_flatten, _run_flatten)
register("Reshape", _infer_reshape, _run_reshape)
register("Transpose", _infer_transpose, _run_transpose)
# Pad (constant mode only): ``pads`` in ONNX order (all begins, then all ends), ``value``.
register("Pad", _infer_pad, _run_pad)
register("BorderPad", _infer_border_pad, _run_border_pad)
register("Concat", _infer_concat, _run_concat, inputs=(1, 1 << 20))
