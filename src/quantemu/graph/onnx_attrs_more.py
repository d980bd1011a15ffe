"""Normalizers of LayerNormalization, Erf, Gelu, Sqrt, Pow, Reciprocal, Squeeze, Unsqueeze,
Pad, Min and Max (see onnx_attrs; the kernels are in :mod:`quantemu.graph.ops.numeric` and
:mod:`quantemu.graph.ops.squeeze`, Pad's in :mod:`quantemu.graph.ops.tensor`)."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node, TensorInfo
from quantemu.graph.onnx_attrs import (
    REVIEWED,
    Context,
    RawNode,
    check_attrs,
    make,
    normalizer,
    require,
)
from quantemu.graph.ops._spec import known

#: LayerNormalization's stash_type values quantemu computes exactly: float32 (1) and double
#: (11); the kernel accumulates in float64, at least as precise as either.
STASH_TYPES = (1, 11)
GELU_APPROXIMATIONS = ("none", "tanh")


def _since(raw: RawNode, ctx: Context, opset: int) -> None:
    require(
        raw,
        ctx.opset >= opset,
        f"{raw.op_type} is defined from opset {opset}, the model imports opset {ctx.opset}",
    )


def _axis(raw: RawNode, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise InvalidInputError(f"{raw}: axis {axis} is out of range for rank {rank}")
    return axis % rank


@normalizer("LayerNormalization")
def _layer_norm(raw: RawNode, ctx: Context) -> Node:
    _since(raw, ctx, 17)
    check_attrs(raw, {"axis", "epsilon", "stash_type"})
    if len(raw.inputs) < 2 or not raw.inputs[1]:
        raise InvalidInputError(f"{raw}: input 1 (Scale) is required")
    stash = int(raw.attrs.get("stash_type", 1))
    require(
        raw,
        stash in STASH_TYPES,
        f"stash_type {stash} is not supported; supported: 1 (float32), 11 (double)",
    )
    attrs = {
        "axis": _axis(raw, int(raw.attrs.get("axis", -1)), ctx.info(raw).rank),
        "epsilon": float(raw.attrs.get("epsilon", 1e-5)),
        "stash_type": stash,
    }
    # Mean and InvStdDev (training outputs) are kept only when something reads them.
    outputs = list(raw.outputs[:3])
    while len(outputs) > 1 and (not outputs[-1] or outputs[-1] not in ctx.used):
        outputs.pop()
    return make(raw, [n for n in raw.inputs[:3] if n], attrs, outputs)


@normalizer("Erf", "Sqrt", "Reciprocal")
def _unary(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, ())
    return make(raw, raw.inputs[:1], {})


@normalizer("Pow")
def _pow(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, ())
    if len(raw.inputs) != 2 or not all(raw.inputs):
        raise InvalidInputError(f"{raw}: Pow takes two inputs (X, Y), got {list(raw.inputs)}")
    return make(raw, [raw.inputs[0], _float_exponent(ctx, raw.inputs[1])], {})


def _float_exponent(ctx: Context, name: str) -> str:
    """An integer constant exponent (Pow-12+ allows one) as a float32 constant of its own: the
    float graph computes in float32, and small integers are exact there."""
    value = ctx.consts.get(name)
    if value is None or value.dtype.kind == "f":
        return name
    converted = f"{name}/float32"
    ctx.consts[converted] = value.astype(np.float32)
    ctx.tensors[converted] = TensorInfo(converted, value.shape, "float32")
    return converted


@normalizer("Gelu")
def _gelu(raw: RawNode, ctx: Context) -> Node:
    _since(raw, ctx, 20)
    check_attrs(raw, {"approximate"})
    approximate = str(raw.attrs.get("approximate", "none"))
    require(
        raw,
        approximate in GELU_APPROXIMATIONS,
        f"approximate {approximate!r} is not supported; supported: none, tanh",
    )
    return make(raw, raw.inputs[:1], {"approximate": approximate})


# -- Squeeze / Unsqueeze ------------------------------------------------------------------------


def _axes_operand(raw: RawNode, ctx: Context) -> list[int] | None:
    """``axes``: the attribute before opset 13, the constant input 1 from opset 13."""
    if ctx.opset < 13:
        check_attrs(raw, {"axes"})
        return None if "axes" not in raw.attrs else [int(a) for a in raw.attrs["axes"]]
    check_attrs(raw, ())
    value = ctx.const(raw, 1, "axes")
    if value is None:
        return None
    if value.dtype.kind not in "iu" or value.ndim > 1:
        raise InvalidInputError(f"{raw}: axes must be a 1-D integer tensor, got {value!r}")
    return [int(a) for a in value.reshape(-1)]


def _unique_axes(raw: RawNode, axes: list[int], rank: int) -> tuple[int, ...]:
    resolved = [_axis(raw, a, rank) for a in axes]
    if len(set(resolved)) != len(resolved):
        raise InvalidInputError(f"{raw}: axes {axes} repeat an axis (rank {rank})")
    return tuple(sorted(resolved))


@normalizer("Squeeze")
def _squeeze(raw: RawNode, ctx: Context) -> Node:
    shape = ctx.info(raw).shape
    axes = _axes_operand(raw, ctx)
    if not axes:
        # Without axes (or with empty ones) every dimension of size 1 goes: decide that here.
        require(
            raw,
            all(known(d) for d in shape),
            f"Squeeze without axes needs a known input shape, got {shape}; give the axes",
        )
        return make(raw, raw.inputs[:1], {"axes": tuple(i for i, d in enumerate(shape) if d == 1)})
    resolved = _unique_axes(raw, axes, len(shape))
    wrong = [a for a in resolved if known(shape[a]) and shape[a] != 1]
    if wrong:
        raise InvalidInputError(f"{raw}: cannot squeeze axes {wrong} of shape {shape} (not 1)")
    return make(raw, raw.inputs[:1], {"axes": resolved})


@normalizer("Unsqueeze")
def _unsqueeze(raw: RawNode, ctx: Context) -> Node:
    axes = _axes_operand(raw, ctx)
    if not axes:
        raise InvalidInputError(f"{raw}: axes are required (attribute or constant input)")
    rank = ctx.info(raw).rank + len(axes)
    return make(raw, raw.inputs[:1], {"axes": _unique_axes(raw, axes, rank)})


# -- Pad ----------------------------------------------------------------------------------------


@normalizer("Pad")
def _pad(raw: RawNode, ctx: Context) -> Node:
    rank = ctx.info(raw).rank
    if ctx.opset < 11:
        check_attrs(raw, {"mode", "pads", "value"})
        if "pads" not in raw.attrs:
            raise InvalidInputError(f"{raw}: attribute pads is required")
        pads = [int(p) for p in raw.attrs["pads"]]
        value = float(raw.attrs.get("value", 0.0))
    else:
        check_attrs(raw, {"mode"})
        pads_value = ctx.const(raw, 1, "pads")
        if pads_value is None or pads_value.dtype.kind not in "iu":
            raise InvalidInputError(f"{raw}: the pads input must be a constant int64 tensor")
        pads = [int(p) for p in pads_value.reshape(-1)]
        value = _pad_value(raw, ctx)
        pads = _full_pads(raw, ctx, pads, rank)
    mode = str(raw.attrs.get("mode", "constant"))
    require(
        raw,
        mode == "constant",
        f"mode {mode!r} is not supported; quantemu supports Pad with mode 'constant' only "
        "(reflect, edge and wrap copy border values; rewrite the model to pad with a constant)",
    )
    if len(pads) != 2 * rank:
        raise InvalidInputError(f"{raw}: pads {pads} must have 2 x rank {rank} entries")
    if min(pads) < 0:
        raise UnsupportedError(
            f"{raw}: negative pads {pads} (cropping) are not supported; use Slice instead"
        )
    return make(raw, raw.inputs[:1], {"pads": tuple(pads), "mode": "constant", "value": value})


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
    axes = [_axis(raw, int(a), rank) for a in axes_value.reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise InvalidInputError(f"{raw}: pads {pads} do not fit axes {axes}")
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
    return full


# Min-8 to Min-13 (and Max) differ only in types; quantemu takes the two-input form.
REVIEWED.update({"Min": (8, 13), "Max": (8, 13)})


@normalizer("Min", "Max")
def _min_max(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, ())
    if len(raw.inputs) != 2 or not all(raw.inputs):
        raise UnsupportedError(
            f"{raw}: {raw.op_type} with {len(raw.inputs)} inputs; quantemu supports exactly two "
            f"(broadcast): nest {raw.op_type} nodes pairwise"
        )
    return make(raw, raw.inputs[:2], {})
