"""Normalizers of the layout ops Flatten, Reshape, Transpose, Concat and Pad (the kernels are
in :mod:`quantemu.graph.ops.tensor`; Pad with mode reflect or edge becomes ``BorderPad``)."""

from __future__ import annotations

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer


@normalizer("Flatten")
def _flatten(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"axis"})
    axis = raw.axis_index(int(raw.attrs.get("axis", 1)), ctx.info(raw).rank, inclusive=True)
    return raw.make(raw.inputs[:1], {"axis": axis})


@normalizer("Reshape")
def _reshape(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"allowzero"})
    shape = ctx.const(raw, 1, "shape")
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise InvalidInputError(f"{raw}: the shape input must be a 1-D int64 constant")
    attrs = {"shape": tuple(int(s) for s in shape), "allowzero": int(raw.attrs.get("allowzero", 0))}
    return raw.make(raw.inputs[:1], attrs)


@normalizer("Transpose")
def _transpose(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"perm"})
    rank = ctx.info(raw).rank
    perm = tuple(int(p) for p in raw.attrs.get("perm", reversed(range(rank))))
    return raw.make(raw.inputs[:1], {"perm": perm})


@normalizer("Concat")
def _concat(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"axis"})
    if "axis" not in raw.attrs:
        raise InvalidInputError(f"{raw}: attribute axis is required")
    axis = raw.axis_index(int(raw.attrs["axis"]), ctx.info(raw).rank)
    return raw.make(raw.inputs, {"axis": axis})


@normalizer("Pad")
def _pad(raw: RawNode, ctx: Context) -> Node:
    rank = ctx.info(raw).rank
    if ctx.opset < 11:
        raw.check_attrs({"mode", "pads", "value"})
        if "pads" not in raw.attrs:
            raise InvalidInputError(f"{raw}: attribute pads is required")
        pads = [int(p) for p in raw.attrs["pads"]]
        value = float(raw.attrs.get("value", 0.0))
    else:
        raw.check_attrs({"mode"})
        pads_value = ctx.const(raw, 1, "pads")
        if pads_value is None or pads_value.dtype.kind not in "iu":
            raise InvalidInputError(f"{raw}: the pads input must be a constant int64 tensor")
        pads = [int(p) for p in pads_value.reshape(-1)]
        value = _pad_value(raw, ctx)
        pads = _full_pads(raw, ctx, pads, rank)
    mode = str(raw.attrs.get("mode", "constant"))
    raw.require(
        mode in _PAD_MODES,
        f"mode {mode!r} is not supported; quantemu runs Pad with modes "
        f"{', '.join(map(repr, _PAD_MODES))} (wrap, opset 19, is not: rewrite the model to pad "
        "with one of those)",
    )
    if len(pads) != 2 * rank:
        raise InvalidInputError(f"{raw}: pads {pads} must have 2 x rank {rank} entries")
    if min(pads) < 0:
        raise UnsupportedError(
            f"{raw}: negative pads {pads} (cropping) are not supported; use Slice instead"
        )
    if mode != "constant":  # a copy of border values: its own IR op (see ops.tensor)
        return Node(
            raw.name,
            "BorderPad",
            raw.inputs[:1],
            raw.outputs[:1],
            {"pads": tuple(pads), "mode": mode},
        )
    return raw.make(raw.inputs[:1], {"pads": tuple(pads), "mode": "constant", "value": value})


#: ONNX's Pad modes quantemu runs (opsets 2 to 25; ``wrap`` came with opset 19).
_PAD_MODES = ("constant", "reflect", "edge")


def _pad_value(raw: RawNode, ctx: Context) -> float:
    value = ctx.const(raw, 2, "constant_value")
    if value is None or value.size == 0:
        return 0.0
    if value.size != 1:
        raise InvalidInputError(f"{raw}: constant_value must be a scalar, got shape {value.shape}")
    return float(value.reshape(()))


def _full_pads(raw: RawNode, ctx: Context, pads: list[int], rank: int) -> list[int]:
    """Opset 18's ``axes`` input: pads for those axes only; the others get none."""
    axes_value = ctx.const(raw, 3, "axes")
    if axes_value is None:
        return pads
    axes = [raw.axis_index(int(a), rank) for a in axes_value.reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise InvalidInputError(f"{raw}: pads {pads} do not fit axes {axes}")
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
    return full
