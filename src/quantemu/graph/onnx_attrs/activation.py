"""Normalizers of the element-wise arithmetic and activation ops: Add, Sub, Mul, Div, PRelu,
Relu, Sigmoid, Tanh, HardSwish, Identity (no attributes), LeakyRelu, HardSigmoid, Clip and
Dropout (the kernels are in :mod:`quantemu.graph.ops.activation`)."""

from __future__ import annotations

import math

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer, without_attributes

#: The ops of this family without attributes: every input is data.
PLAIN = ("Add", "Sub", "Mul", "Div", "PRelu", "Relu", "Sigmoid", "Tanh", "HardSwish", "Identity")
normalizer(*PLAIN)(without_attributes)


@normalizer("LeakyRelu")
def _leaky_relu(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"alpha"})
    return raw.make(raw.inputs[:1], {"alpha": float(raw.attrs.get("alpha", 0.01))})


@normalizer("HardSigmoid")
def _hard_sigmoid(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"alpha", "beta"})
    attrs = {"alpha": float(raw.attrs.get("alpha", 0.2)), "beta": float(raw.attrs.get("beta", 0.5))}
    return raw.make(raw.inputs[:1], attrs)


@normalizer("Clip")
def _clip(raw: RawNode, ctx: Context) -> Node:
    if ctx.opset < 11:
        raw.check_attrs({"min", "max"})
        low, high = raw.attrs.get("min", -math.inf), raw.attrs.get("max", math.inf)
    else:
        raw.check_attrs(())
        low_array, high_array = ctx.const(raw, 1, "min"), ctx.const(raw, 2, "max")
        low = -math.inf if low_array is None else _scalar(raw, low_array, "min")
        high = math.inf if high_array is None else _scalar(raw, high_array, "max")
    return raw.make(raw.inputs[:1], {"min": float(low), "max": float(high)})


def _scalar(raw: RawNode, value: np.ndarray, role: str) -> float:
    if value.size != 1:
        raise InvalidInputError(f"{raw}: {role} must be a scalar, got shape {value.shape}")
    return float(value.reshape(()))


@normalizer("Dropout")
def _dropout(raw: RawNode, ctx: Context) -> Node:
    raw.single_output(ctx, "mask")
    if ctx.opset < 12:
        raw.check_attrs({"ratio"})
    else:
        raw.check_attrs({"seed"})
        training = ctx.const(raw, 2, "training_mode")
        raw.require(
            training is None or not bool(training.reshape(-1)[0]),
            "training_mode=true is not supported; quantemu imports inference graphs",
        )
    return raw.make(raw.inputs[:1], {})
