"""``tflite`` layers and rules of the two-input elementwise operators: Add, Sub, Mul and
SquaredDifference (ADD, SUB, MUL, SQUARED_DIFFERENCE: :mod:`quantemu.backends.tflite.elementwise`),
Min and Max (MINIMUM, MAXIMUM: :mod:`quantemu.backends.tflite.maximum_minimum`).

A constant operand is held as codes. ADD, SUB, MUL and SQUARED_DIFFERENCE take each operand on
its own quantization. MINIMUM / MAXIMUM compare raw codes, so TFLite's converter gives their
inputs and output one quantization: the output takes the (first) activation input's, a constant
operand is quantized on it (a model's own constant codes are used as they are), and another
activation on other parameters is requantized first (the QUANTIZE the converter inserts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.elementwise import add, mul, squared_difference_int8
from quantemu.backends.tflite.elementwise_params import (
    AddParams,
    MulParams,
    SquaredDifferenceParams,
    add_params,
    mul_params,
    squared_difference_params,
    sub_params,
)
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.maximum_minimum import maximum_int8, minimum_int8
from quantemu.backends.tflite.params import RequantizeParams, requantize_params
from quantemu.backends.tflite.requant import requantize
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

__all__ = [
    "KERNELS",
    "BinaryLayer",
    "MinMaxLayer",
    "lower_binary",
    "lower_min_max",
    "lower_squared_difference",
]

#: The kernel each parameter set runs (SUB is ADD's kernel with ``subtract``).
KERNELS: dict[type, Callable] = {
    AddParams: add,
    MulParams: mul,
    SquaredDifferenceParams: squared_difference_int8,
}


def _operands(constants, inputs: list[QTensor]) -> tuple[np.ndarray, np.ndarray]:
    """Both operands' codes: a constant as held, else the next fed input."""
    fed = iter(inputs)
    a, b = (c if c is not None else next(fed).codes for c in constants)
    return a, b


@dataclass(frozen=True, eq=False, kw_only=True)
class BinaryLayer(Layer):
    """ADD, SUB (``AddParams``), MUL (``MulParams``) or SQUARED_DIFFERENCE
    (``SquaredDifferenceParams``); a constant operand is held as codes."""

    params: AddParams | MulParams | SquaredDifferenceParams
    encoding: LinearEncoding
    constants: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Broadcasting as NumPy (the graph's shapes broadcast as TFLite's do)."""
        kernel = KERNELS[type(self.params)]
        y, counters = kernel(*_operands(self.constants, inputs), self.params)
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class MinMaxLayer(Layer):
    """MINIMUM or MAXIMUM (``maximum``) of codes on one quantization; ``requant`` holds, per
    activation input, the QUANTIZE onto it (None: already on it)."""

    maximum: bool
    encoding: LinearEncoding
    constants: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    requant: tuple[RequantizeParams | None, ...] = ()

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The requantizations, then the comparison of codes."""
        fed, counters = [], {}
        for t, p in zip(inputs, self.requant, strict=True):
            if p is None:
                fed.append(t)
                continue
            codes, c = requantize(t.codes, p)
            counters = {k: counters.get(k, 0) + v for k, v in c.items()}
            fed.append(QTensor(np.asarray(codes, np.int8), self.encoding))
        kernel = maximum_int8 if self.maximum else minimum_int8
        y, _ = kernel(*_operands(self.constants, fed))
        return LayerOutput(QTensor(y, self.encoding), counters)


def _arithmetic_operands(ctx: TfliteContext, node: Node):
    """``(constants, (s1, z1, s2, z2, s_out, z_out), output encoding)`` of a two-input
    arithmetic node, each operand on its own quantization (not both constant)."""
    (c1, e1), (c2, e2) = (ctx.operand(n) for n in node.inputs[:2])
    if c1 is not None and c2 is not None:
        raise UnsupportedError(f"{node}: both operands are constant; fold them first")
    e_out = ctx.encoding(node.outputs[0])
    args = (e1.scale, e1.zero_point, e2.scale, e2.zero_point, e_out.scale, e_out.zero_point)
    return (c1, c2), args, e_out


def lower_binary(ctx: TfliteContext, node: Node) -> Layer:
    """Add, Sub, Mul: ADD / SUB / MUL with their fused activation."""
    constants, args, e_out = _arithmetic_operands(ctx, node)
    if node.op_type == "Mul":
        params, op = mul_params(*args), "MUL"
    elif node.op_type == "Sub":
        params, op = sub_params(*args, runtime=ctx.options.kernel_runtime), "SUB"
    else:
        params, op = add_params(*args), "ADD"
    return ctx.layer(
        BinaryLayer,
        node,
        op=op,
        params=ctx.with_fused_activation(params, node, e_out),
        encoding=e_out,
        constants=constants,
    )


def lower_squared_difference(ctx: TfliteContext, node: Node) -> Layer:
    """SquaredDifference: SQUARED_DIFFERENCE (each operand on its own quantization). XMOS's
    host interpreter (``runtime=xmos_tflite_micro``) registers no such kernel; xcore-opt keeps
    the builtin, which the device's TFLite-Micro runs (the xs3 rules)."""
    if "SQUARED_DIFFERENCE" in ctx.options.missing_builtins:
        raise NotLowerable(
            "XMOS's host interpreter (xmos-ai-tools 1.4.2) registers no SQUARED_DIFFERENCE "
            "kernel (\"Didn't find op for builtin opcode 'SQUARED_DIFFERENCE'\"); runtime "
            "'tflite_micro' or 'litert_reference' runs it"
        )
    constants, args, e_out = _arithmetic_operands(ctx, node)
    params = squared_difference_params(*args)
    return ctx.layer(
        BinaryLayer,
        node,
        op="SQUARED_DIFFERENCE",
        params=params,
        encoding=e_out,
        constants=constants,
    )


def _constant_codes(ctx: TfliteContext, name: str, enc: LinearEncoding) -> np.ndarray | None:
    """A constant operand's codes: the model's own, else the value quantized on ``enc``."""
    value = ctx.const(name)
    if value is None:
        return None
    override = ctx.graph.quant_overrides.get(name)
    if override is not None and override.values is not None:
        return np.asarray(override.values, np.int64)
    codes = enc.quantize(value).astype(np.int64)
    return np.clip(codes, -128, 127)


def lower_min_max(ctx: TfliteContext, node: Node) -> Layer:
    """Min / Max of two inputs: MINIMUM / MAXIMUM on the first activation input's quantization."""
    if len(node.inputs) != 2:
        raise UnsupportedError(f"{node}: {node.op_type} of {len(node.inputs)} inputs; give two")
    active = [n for n in node.inputs if ctx.const(n) is None]
    if not active:
        raise UnsupportedError(f"{node}: both operands are constant; fold them first")
    anchor = dataclasses.replace(node, inputs=(active[0],))
    enc = ctx.same_as_input(anchor)
    constants = tuple(_constant_codes(ctx, n, enc) for n in node.inputs)
    requant = []
    for name in active:
        e = ctx.encoding(name)
        same = (e.scale, int(e.zero_point)) == (enc.scale, int(enc.zero_point))
        requant.append(
            None if same else requantize_params(e.scale, e.zero_point, enc.scale, enc.zero_point)
        )
    maximum = node.op_type == "Max"
    return ctx.layer(
        MinMaxLayer,
        node,
        op="MAXIMUM" if maximum else "MINIMUM",
        maximum=maximum,
        encoding=enc,
        constants=constants,
        requant=tuple(requant),
    )
