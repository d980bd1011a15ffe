"""Normalizers of Squeeze and Unsqueeze: explicit, sorted, non-negative ``axes`` (the kernels
are in :mod:`quantemu.graph.ops.squeeze`)."""

from __future__ import annotations

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer
from quantemu.graph.ops._spec import known


def _axes_operand(raw: RawNode, ctx: Context) -> list[int] | None:
    """``axes``: the attribute before opset 13, the constant input 1 from opset 13."""
    if ctx.opset < 13:
        raw.check_attrs({"axes"})
        return None if "axes" not in raw.attrs else [int(a) for a in raw.attrs["axes"]]
    raw.check_attrs(())
    value = ctx.const(raw, 1, "axes")
    if value is None:
        return None
    if value.dtype.kind not in "iu" or value.ndim > 1:
        raise InvalidInputError(f"{raw}: axes must be a 1-D integer tensor, got {value!r}")
    return [int(a) for a in value.reshape(-1)]


def _unique_axes(raw: RawNode, axes: list[int], rank: int) -> tuple[int, ...]:
    resolved = [raw.axis_index(a, rank) for a in axes]
    if len(set(resolved)) != len(resolved):
        raise InvalidInputError(f"{raw}: axes {axes} repeat an axis (rank {rank})")
    return tuple(sorted(resolved))


@normalizer("Squeeze")
def _squeeze(raw: RawNode, ctx: Context) -> Node:
    shape = ctx.info(raw).shape
    axes = _axes_operand(raw, ctx)
    if not axes:
        # Without axes (or with empty ones) every dimension of size 1 goes: decide that here.
        raw.require(
            all(known(d) for d in shape),
            f"Squeeze without axes needs a known input shape, got {shape}; give the axes",
        )
        return raw.make(raw.inputs[:1], {"axes": tuple(i for i, d in enumerate(shape) if d == 1)})
    resolved = _unique_axes(raw, axes, len(shape))
    wrong = [a for a in resolved if known(shape[a]) and shape[a] != 1]
    if wrong:
        raise InvalidInputError(f"{raw}: cannot squeeze axes {wrong} of shape {shape} (not 1)")
    return raw.make(raw.inputs[:1], {"axes": resolved})


@normalizer("Unsqueeze")
def _unsqueeze(raw: RawNode, ctx: Context) -> Node:
    axes = _axes_operand(raw, ctx)
    if not axes:
        raise InvalidInputError(f"{raw}: axes are required (attribute or constant input)")
    rank = ctx.info(raw).rank + len(axes)
    return raw.make(raw.inputs[:1], {"axes": _unique_axes(raw, axes, rank)})
