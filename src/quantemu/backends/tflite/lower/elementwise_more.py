"""``tflite`` rules and layers for SquaredDifference, Rsqrt, Min and Max: SQUARED_DIFFERENCE
(:mod:`quantemu.backends.tflite.elementwise`), RSQRT (:mod:`quantemu.backends.tflite.rsqrt`),
MINIMUM and MAXIMUM (:mod:`quantemu.backends.tflite.maximum_minimum`).

MINIMUM / MAXIMUM compare raw codes, so TFLite's converter gives their inputs and output one
quantization: the output takes the (first) activation input's, a constant operand is quantized
on it (a model's own constant codes are used as they are), and another activation on other
parameters is requantized first (the QUANTIZE the converter inserts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.elementwise import squared_difference_int8
from quantemu.backends.tflite.elementwise_params import (
    SquaredDifferenceParams,
    squared_difference_params,
)
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.options import Runtime
from quantemu.backends.tflite.maximum_minimum import maximum_int8, minimum_int8
from quantemu.backends.tflite.params import RequantizeParams, requantize_params
from quantemu.backends.tflite.requant import requantize
from quantemu.backends.tflite.rsqrt import RsqrtParams, rsqrt_int8, rsqrt_params
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

__all__ = [
    "MinMaxLayer",
    "RsqrtLayer",
    "SquaredDifferenceLayer",
    "lower_min_max",
    "lower_rsqrt",
    "lower_squared_difference",
]


def _operands(layer, inputs: list[QTensor]) -> tuple[np.ndarray, np.ndarray]:
    fed = iter(inputs)
    a, b = (c if c is not None else next(fed).codes for c in layer.constants)
    return a, b


@dataclass(frozen=True, eq=False, kw_only=True)
class SquaredDifferenceLayer(Layer):
    """SQUARED_DIFFERENCE; a constant operand is held as codes."""

    params: SquaredDifferenceParams
    encoding: LinearEncoding
    constants: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Broadcasting as NumPy (the graph's shapes broadcast as TFLite's do)."""
        y, counters = squared_difference_int8(*_operands(self, inputs), self.params)
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class RsqrtLayer(Layer):
    """RSQRT (tabulated at Prepare); a code below the input zero point is an error."""

    params: RsqrtParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The table lookup of :func:`~quantemu.backends.tflite.rsqrt.rsqrt_int8`."""
        y, counters = rsqrt_int8(inputs[0].codes, self.params)
        return LayerOutput(QTensor(y, self.encoding), counters)


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
        y, _ = kernel(*_operands(self, fed))
        return LayerOutput(QTensor(y, self.encoding), counters)


def lower_squared_difference(ctx: TfliteContext, node: Node) -> Layer:
    """SquaredDifference: SQUARED_DIFFERENCE (each operand on its own quantization). XMOS's
    host interpreter (``runtime=xmos_tflite_micro``) registers no such kernel; xcore-opt keeps
    the builtin, which the device's TFLite-Micro runs (the xs3 rules)."""
    if getattr(ctx.options, "runtime", None) is Runtime.XMOS_TFLITE_MICRO:
        raise NotLowerable(
            "XMOS's host interpreter (xmos-ai-tools 1.4.2) registers no SQUARED_DIFFERENCE "
            "kernel (\"Didn't find op for builtin opcode 'SQUARED_DIFFERENCE'\"); runtime "
            "'tflite_micro' or 'litert_reference' runs it"
        )
    (c1, e1), (c2, e2) = (ctx.operand(n) for n in node.inputs[:2])
    if c1 is not None and c2 is not None:
        raise UnsupportedError(f"{node}: both operands are constant; fold them first")
    e_out = ctx.encoding(node.outputs[0])
    params = squared_difference_params(
        e1.scale, e1.zero_point, e2.scale, e2.zero_point, e_out.scale, e_out.zero_point
    )
    return ctx.layer(
        SquaredDifferenceLayer,
        node,
        op="SQUARED_DIFFERENCE",
        params=params,
        encoding=e_out,
        constants=(c1, c2),
    )


def lower_rsqrt(ctx: TfliteContext, node: Node) -> Layer:
    """Rsqrt: RSQRT (LiteRT and TFLite-Micro run the same int8 kernel)."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    params = rsqrt_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point)
    return ctx.layer(RsqrtLayer, node, op="RSQRT", params=params, encoding=e_out)


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
