"""Data movement, lookup-table activations and float fallbacks.

- Flatten, Reshape, Transpose, Identity, Dropout move int8 codes unchanged (TFLite quantizes
  their output like their input), so they are exact. Tensors keep the graph's layout (NCHW), so
  a Flatten before a Gemm flattens in the float model's order.
- Standalone Relu, Clip, Sigmoid and Tanh become ``XC_lookup_8``: tflite2xcore builds a 256-entry
  table by dequantizing every int8 code (float32), applying the float activation and quantizing
  with ``np.round`` (ties to even); lib_nn's ``lookup8`` then indexes it. The table is the
  converter's; the lookup is exact. TFLite fixes the output quantization of LOGISTIC (scale
  1/256, zero point -128) and TANH (1/128, 0), and of SOFTMAX (1/256, -128).
- Any other operator has no lib_nn int8 form: XMOS's runtime would run TFLite-Micro's int8
  reference kernel. quantemu approximates it in float (dequantize, quantemu.graph's float
  kernel, requantize as TFLite's QUANTIZE: ``round_half_away(x / scale) + zp``, clamped), with
  ``exact=False`` and a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.backends.xs3.lower_context import LoweringContext
from quantemu.backends.xs3.lower_quant import int8_encoding, round_half_away
from quantemu.errors import UnsupportedError
from quantemu.graph.executor import run_node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

MOVES = ("Flatten", "Reshape", "Transpose", "Identity", "Dropout")
LUT_OPS = ("Relu", "Clip", "Sigmoid", "Tanh")
# TFLite's fixed int8 output quantization (operator_property restricted values).
FIXED_OUTPUT = {"Sigmoid": (1 / 256, -128), "Tanh": (1 / 128, 0), "Softmax": (1 / 256, -128)}
FALLBACK_NOTE = (
    "no lib_nn int8 operator: XMOS's runtime runs TFLite-Micro's int8 reference {op}; quantemu "
    "approximates it in float (dequantize, float {op}, requantize), not bit-exact"
)


def fixed_output_encoding(ctx: LoweringContext, node) -> LinearEncoding:
    """The output encoding: TFLite's fixed one for Sigmoid/Tanh/Softmax unless overridden."""
    out = node.outputs[0]
    if node.op_type in FIXED_OUTPUT and out not in ctx.graph.quant_overrides:
        scale, zero_point = FIXED_OUTPUT[node.op_type]
        ctx.encodings[out] = int8_encoding(scale, zero_point)
    return ctx.encoding(out)


def _reshaped(node, codes: np.ndarray) -> np.ndarray:
    attrs = node.attrs
    if node.op_type == "Flatten":
        axis = attrs["axis"]
        return codes.reshape(int(np.prod(codes.shape[:axis])), -1)
    if node.op_type == "Reshape":
        target = list(attrs["shape"])
        if not attrs.get("allowzero", 0):
            target = [codes.shape[i] if d == 0 else d for i, d in enumerate(target)]
        return codes.reshape(target)
    if node.op_type == "Transpose":
        return codes.transpose(attrs["perm"])
    return codes  # Identity, Dropout (inference)


@dataclass(frozen=True, eq=False, kw_only=True)
class MoveLayer(Layer):
    """Flatten / Reshape / Transpose / Identity / Dropout on int8 codes (exact)."""

    node: Any

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The same codes in the new shape, with the input's encoding."""
        return LayerOutput(QTensor(_reshaped(self.node, inputs[0].codes), inputs[0].encoding))


def lower_move(ctx: LoweringContext, node) -> Layer:
    """A data-movement node: codes and encoding pass through."""
    enc = ctx.encoding(node.inputs[0])
    ctx.same_as_input(node.outputs[0], enc, str(node))
    op = "reshape" if node.op_type in ("Flatten", "Reshape") else node.op_type.lower()
    return MoveLayer(
        name=node.name,
        op=op,
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note="",
        node=node,
    )


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


def lower_lookup(ctx: LoweringContext, node) -> Layer:
    """Relu / Clip / Sigmoid / Tanh as an ``XC_lookup_8`` table."""
    enc_in = ctx.encoding(node.inputs[0])
    enc_out = fixed_output_encoding(ctx, node)
    table, clipped = lookup_table(node.op_type, node.attrs, enc_in, enc_out)
    note = "table built as tflite2xcore's LegalizeXCLookupTablePass; the lookup is exact"
    return LookupLayer(
        name=node.name,
        op="lookup8",
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        table=table,
        clipped=clipped,
        encoding=enc_out,
    )


def tflite_quantize(values: np.ndarray, enc: LinearEncoding):
    """TFLite's QUANTIZE: ``clamp(round_half_away(float32(x) / scale) + zp)``; saturations."""
    v = np.asarray(values, np.float32) / np.float32(enc.scale)
    codes = round_half_away(v) + int(enc.zero_point)
    clipped = np.clip(codes, -128, 127)
    return clipped.astype(np.int8), int(np.count_nonzero(clipped != codes))


@dataclass(frozen=True, eq=False, kw_only=True)
class FloatLayer(Layer):
    """A float fallback: dequantize, run quantemu.graph's float kernel, requantize."""

    node: Any
    constants: Mapping[str, np.ndarray]
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """``output_saturated`` counts values outside the output encoding's range."""
        fed = iter(q.dequantize() for q in inputs)
        args = [
            None if not n else (self.constants[n] if n in self.constants else next(fed))
            for n in self.node.inputs
        ]
        out = run_node(self.node, args)[0]
        if not np.all(np.isfinite(out)):
            raise UnsupportedError(f"{self.node}: the float fallback produced inf/nan")
        codes, n_sat = tflite_quantize(out, self.encoding)
        return LayerOutput(QTensor(codes, self.encoding), {"output_saturated": n_sat})


def lower_float(ctx: LoweringContext, node, why: str = "") -> Layer:
    """An explicit float fallback layer (``exact=False``) for ``node``."""
    if len(node.outputs) != 1:
        raise UnsupportedError(f"{node}: only single-output operators can fall back to float")
    enc_out = fixed_output_encoding(ctx, node)
    for name in ctx.data_inputs(node):
        ctx.encoding(name)
    constants = {n: ctx.const(n) for n in node.inputs if n and ctx.const(n) is not None}
    note = FALLBACK_NOTE.format(op=node.op_type) + (f" ({why})" if why else "")
    return FloatLayer(
        name=node.name,
        op=f"float:{node.op_type}",
        inputs=ctx.data_inputs(node),
        output=node.outputs[0],
        exact=False,
        note=note,
        node=node,
        constants=constants,
        encoding=enc_out,
    )
