"""Standalone Relu, Clip, Sigmoid and Tanh as lib_nn ``lookup8`` (tflite2xcore's XC_lookup_8).

tflite2xcore builds a 256-entry table by dequantizing every int8 code (float32), applying the
float activation and quantizing with ``np.round`` (ties to even); lib_nn's ``lookup8`` then
indexes it. The table is the converter's; the lookup is exact. TFLite fixes the output
quantization of LOGISTIC (scale 1/256, zero point -128) and TANH (1/128, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

LUT_OPS = ("Relu", "Clip", "Sigmoid", "Tanh")
_ACTIVATIONS = {
    "Relu": lambda x, a: np.maximum(x, np.float32(0)),
    "Clip": lambda x, a: np.minimum(np.maximum(x, np.float32(a["min"])), np.float32(a["max"])),
    "Tanh": lambda x, a: np.tanh(x),
    "Sigmoid": lambda x, a: np.float32(1) / (np.float32(1) + np.exp(-x)),
}


def lookup_table(op_type: str, attrs, enc_in: LinearEncoding, enc_out: LinearEncoding):
    """tflite2xcore's ``XC_lookup_8`` table: ``(table, clipped)``, both indexed by code + 128.

    ``clipped`` marks entries whose quantized value had to be clamped to int8.
    """
    codes = np.arange(-128, 128, dtype=np.float32)
    x = (codes - np.float32(enc_in.zero_point)) * np.float32(enc_in.scale)
    with np.errstate(over="ignore"):
        y = _ACTIVATIONS[op_type](x, attrs).astype(np.float32)
    t = np.round(y / np.float32(enc_out.scale) + np.float32(enc_out.zero_point))
    table = np.clip(t, -128, 127)
    return table.astype(np.int8), table != t


@dataclass(frozen=True, eq=False, kw_only=True)
class LookupLayer(Layer):
    """lib_nn ``lookup8``: ``y = table[x + 128]``."""

    table: np.ndarray
    clipped: np.ndarray
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """One gather; ``output_saturated`` counts lookups of entries the table clamped."""
        index = inputs[0].codes.astype(np.intp) + 128
        counters = {"output_saturated": int(np.count_nonzero(self.clipped[index]))}
        return LayerOutput(QTensor(self.table[index], self.encoding), counters)


def lower_lookup(ctx: Xs3Context, node: Node) -> Layer:
    """Relu / Clip / Sigmoid / Tanh as an ``XC_lookup_8`` table."""
    enc_in = ctx.encoding(node.inputs[0])
    enc_out = ctx.output_encoding(node)
    table, clipped = lookup_table(node.op_type, node.attrs, enc_in, enc_out)
    note = "table built as tflite2xcore's LegalizeXCLookupTablePass; the lookup is exact"
    return ctx.layer(
        LookupLayer,
        node,
        op="lookup8",
        inputs=node.inputs[:1],
        note=note,
        table=table,
        clipped=clipped,
        encoding=enc_out,
    )
