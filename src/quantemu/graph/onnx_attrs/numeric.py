"""Normalizers of LayerNormalization, Erf, Gelu, Sqrt, Reciprocal, Pow, Min and Max (the kernels
are in :mod:`quantemu.graph.ops.numeric`)."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node, TensorInfo
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer
from quantemu.graph.onnx_attrs.opsets import REVIEWED

#: LayerNormalization's stash_type values quantemu computes exactly: float32 (1) and double
#: (11); the kernel accumulates in float64, at least as precise as either.
STASH_TYPES = (1, 11)
GELU_APPROXIMATIONS = ("none", "tanh")

# Min-8 to Min-13 (and Max) differ only in types; quantemu takes the two-input form.
REVIEWED.update({"Min": (8, 13), "Max": (8, 13)})


def _since(raw: RawNode, ctx: Context, opset: int) -> None:
    raw.require(
        ctx.opset >= opset,
        f"{raw.op_type} is defined from opset {opset}, the model imports opset {ctx.opset}",
    )


@normalizer("LayerNormalization")
def _layer_norm(raw: RawNode, ctx: Context) -> Node:
    _since(raw, ctx, 17)
    raw.check_attrs({"axis", "epsilon", "stash_type"})
    if len(raw.inputs) < 2 or not raw.inputs[1]:
        raise InvalidInputError(f"{raw}: input 1 (Scale) is required")
    stash = int(raw.attrs.get("stash_type", 1))
    raw.require(
        stash in STASH_TYPES,
        f"stash_type {stash} is not supported; supported: 1 (float32), 11 (double)",
    )
    attrs = {
        "axis": raw.axis_index(int(raw.attrs.get("axis", -1)), ctx.info(raw).rank),
        "epsilon": float(raw.attrs.get("epsilon", 1e-5)),
        "stash_type": stash,
    }
    # Mean and InvStdDev (training outputs) are kept only when something reads them.
    outputs = list(raw.outputs[:3])
    while len(outputs) > 1 and (not outputs[-1] or outputs[-1] not in ctx.used):
        outputs.pop()
    return raw.make([n for n in raw.inputs[:3] if n], attrs, outputs)


@normalizer("Erf", "Sqrt", "Reciprocal")
def _unary(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(())
    return raw.make(raw.inputs[:1], {})


@normalizer("Pow")
def _pow(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(())
    if len(raw.inputs) != 2 or not all(raw.inputs):
        raise InvalidInputError(f"{raw}: Pow takes two inputs (X, Y), got {list(raw.inputs)}")
    return raw.make([raw.inputs[0], _float_exponent(ctx, raw.inputs[1])], {})


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
    raw.check_attrs({"approximate"})
    approximate = str(raw.attrs.get("approximate", "none"))
    raw.require(
        approximate in GELU_APPROXIMATIONS,
        f"approximate {approximate!r} is not supported; supported: none, tanh",
    )
    return raw.make(raw.inputs[:1], {"approximate": approximate})


@normalizer("Min", "Max")
def _min_max(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(())
    if len(raw.inputs) != 2 or not all(raw.inputs):
        raise UnsupportedError(
            f"{raw}: {raw.op_type} with {len(raw.inputs)} inputs; quantemu supports exactly two "
            f"(broadcast): nest {raw.op_type} nodes pairwise"
        )
    return raw.make(raw.inputs[:2], {})
