"""Normalizers of BatchNormalization, LRN, Softmax and ReduceMean (the kernels are in
:mod:`quantemu.graph.ops.normalize`)."""

from __future__ import annotations

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer


@normalizer("BatchNormalization")
def _batchnorm(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"epsilon", "momentum", "training_mode"})
    raw.require(
        int(raw.attrs.get("training_mode", 0)) == 0,
        "training_mode=1 is not supported;"
        " quantemu imports inference graphs (export the model in eval mode)",
    )
    raw.single_output(ctx, "running statistics")
    return raw.make(raw.inputs[:5], {"epsilon": float(raw.attrs.get("epsilon", 1e-5))})


@normalizer("LRN")
def _lrn(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"alpha", "beta", "bias", "size"})
    if "size" not in raw.attrs:
        raise InvalidInputError(f"{raw}: attribute size is required")
    attrs = {
        "size": int(raw.attrs["size"]),
        "alpha": float(raw.attrs.get("alpha", 1e-4)),
        "beta": float(raw.attrs.get("beta", 0.75)),
        "bias": float(raw.attrs.get("bias", 1.0)),
    }
    return raw.make(raw.inputs[:1], attrs)


@normalizer("Softmax")
def _softmax(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"axis"})
    rank = ctx.info(raw).rank
    legacy = ctx.opset < 13
    axis = raw.axis_index(int(raw.attrs.get("axis", 1 if legacy else -1)), rank)
    # Before opset 13 Softmax flattens to 2-D at axis; that is the same as a softmax over the
    # last axis when axis is the last axis.
    return raw.make(raw.inputs[:1], {"axis": axis, "coerce_2d": int(legacy and axis != rank - 1)})


@normalizer("ReduceMean")
def _reduce_mean(raw: RawNode, ctx: Context) -> Node:
    rank = ctx.info(raw).rank
    if ctx.opset < 18:
        raw.check_attrs({"axes", "keepdims"})
        axes = raw.attrs.get("axes", ())
        noop = 0
    else:
        raw.check_attrs({"keepdims", "noop_with_empty_axes"})
        value = ctx.const(raw, 1, "axes")
        axes = () if value is None else value.reshape(-1).tolist()
        noop = int(raw.attrs.get("noop_with_empty_axes", 0))
    if not axes and noop:
        return Node(raw.name, "Identity", raw.inputs[:1], raw.outputs[:1], {})
    axes = tuple(sorted({raw.axis_index(int(a), rank) for a in axes})) or tuple(range(rank))
    keepdims = int(raw.attrs.get("keepdims", 1))
    if keepdims not in (0, 1):  # onnxruntime keeps only for 1: other values are ambiguous
        raise InvalidInputError(f"{raw}: keepdims {keepdims} must be 0 or 1")
    return raw.make(raw.inputs[:1], {"axes": axes, "keepdims": keepdims})
