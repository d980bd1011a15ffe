"""Normalizers of Gather, Slice, Expand and Where (the kernels are in
:mod:`quantemu.graph.ops.index`). Split is rewritten into one Slice per output and shape
sub-graphs are folded before normalization (:mod:`quantemu.graph.onnx_shape_fold`)."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import UNKNOWN_DIM, Node
from quantemu.graph.onnx_attrs.base import BIND_HINT, Context, RawNode, normalizer
from quantemu.graph.onnx_attrs.opsets import REVIEWED
from quantemu.graph.ops._spec import known

#: An end at or past this is "to the end of the axis" whatever its size (ONNX exporters write
#: INT64_MAX or INT32_MAX there).
OPEN_END = 2**31 - 1

# Split is rewritten into Slices (onnx_shape_fold); Shape and Size fold with ONNX's reference
# implementation and need no review.
REVIEWED.update(
    {"Expand": (8, 13), "Gather": (1, 13), "Slice": (1, 13), "Split": (2, 18), "Where": (9, 16)}
)


def _int_const(raw: RawNode, ctx: Context, index: int, role: str) -> np.ndarray | None:
    value = ctx.const(raw, index, role)
    if value is not None and value.dtype.kind not in "iu":
        raise InvalidInputError(f"{raw}: {role} must be an integer tensor, got {value.dtype}")
    return value


def _batch_axis(raw: RawNode, ctx: Context, axis: int) -> None:
    """Axis 0 of a named symbolic size is the batch: indexing it would depend on how samples
    are fed. (A size the model leaves unnamed, ``?``, is taken as the model gives it.)"""
    dim = ctx.info(raw).shape[axis]
    if axis == 0 and not known(dim) and dim != UNKNOWN_DIM:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} on the batch axis (axis 0, of symbolic size {dim!r}) is not "
            f"supported; index another axis, or {BIND_HINT}"
        )


@normalizer("Gather")
def _gather(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"axis"})
    x = ctx.info(raw)
    axis = raw.axis_index(int(raw.attrs.get("axis", 0)), x.rank)
    indices = _int_const(raw, ctx, 1, "indices")
    if indices is None:
        raise InvalidInputError(f"{raw}: input 1 (indices) is required")
    _batch_axis(raw, ctx, axis)
    dim, flat = x.shape[axis], [int(i) for i in indices.reshape(-1)]
    if not known(dim) and min(flat, default=0) < 0:
        raise UnsupportedError(
            f"{raw}: negative indices {flat} on axis {axis} of symbolic size {dim!r} cannot be "
            f"resolved; {BIND_HINT}"
        )
    if known(dim):
        bad = [i for i in flat if not -dim <= i < dim]
        if bad:
            raise InvalidInputError(f"{raw}: indices {bad} are out of range for size {dim}")
        flat = [i % dim for i in flat]
    attrs = {"axis": axis, "indices": tuple(flat), "indices_shape": tuple(indices.shape)}
    return raw.make(raw.inputs[:1], attrs)


def _slice_operands(raw: RawNode, ctx: Context) -> list[list[int] | None]:
    """starts, ends, axes, steps: attributes before opset 10, constant inputs from opset 10."""
    if ctx.opset < 10:
        raw.check_attrs({"starts", "ends", "axes"})
        for key in ("starts", "ends"):
            if key not in raw.attrs:
                raise InvalidInputError(f"{raw}: attribute {key} is required")
        found = [raw.attrs.get(k) for k in ("starts", "ends", "axes")]
        return [None if v is None else [int(a) for a in v] for v in found] + [None]
    raw.check_attrs(())
    values = []
    for index, role in enumerate(("starts", "ends", "axes", "steps"), start=1):
        value = _int_const(raw, ctx, index, role)
        values.append(None if value is None else [int(a) for a in value.reshape(-1)])
    if values[0] is None or values[1] is None:
        raise InvalidInputError(f"{raw}: inputs starts and ends are required")
    return values


@normalizer("Slice")
def _slice(raw: RawNode, ctx: Context) -> Node:
    starts, ends, axes, steps = _slice_operands(raw, ctx)
    shape = ctx.info(raw).shape
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidInputError(
            f"{raw}: starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length"
        )
    axes = [raw.axis_index(a, len(shape)) for a in axes]
    if len(set(axes)) != len(axes) or 0 in steps:
        raise InvalidInputError(f"{raw}: axes {axes} repeat an axis or steps {steps} hold a 0")
    kept = []
    for part in zip(axes, starts, ends, steps, strict=True):
        axis, start, end, step = part
        # A full slice of an axis (symbolic or not) moves nothing; drop it.
        if start == 0 and step == 1 and (end >= OPEN_END or end == shape[axis]):
            continue
        _batch_axis(raw, ctx, axis)
        kept.append((axis, min(max(start, -OPEN_END), OPEN_END), min(max(end, -OPEN_END - 1),
                     OPEN_END), step))  # fmt: skip
    columns = list(zip(*kept, strict=True)) or [(), (), (), ()]
    attrs = dict(zip(("axes", "starts", "ends", "steps"), map(tuple, columns), strict=True))
    return raw.make(raw.inputs[:1], attrs)


@normalizer("Expand")
def _expand(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(())
    shape = _int_const(raw, ctx, 1, "shape")
    if shape is None or shape.ndim != 1:
        raise InvalidInputError(f"{raw}: the shape input must be a 1-D int64 constant")
    return raw.make(raw.inputs[:1], {"shape": tuple(int(s) for s in shape)})


@normalizer("Where")
def _where(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(())
    if len(raw.inputs) != 3 or not all(raw.inputs):
        raise InvalidInputError(f"{raw}: Where takes three inputs, got {list(raw.inputs)}")
    condition = ctx.const(raw, 0, "condition")
    attrs = {
        "condition": tuple(int(bool(c)) for c in condition.reshape(-1)),
        "condition_shape": tuple(condition.shape),
    }
    return raw.make(raw.inputs[1:], attrs)


@normalizer("Shape", "Size", "Split")
def _rewritten(raw: RawNode, ctx: Context) -> Node:
    # Listed as supported; onnx_shape_fold folds or rewrites these before normalization.
    raise InvalidInputError(f"{raw}: {raw.op_type} reached normalization unrewritten")
