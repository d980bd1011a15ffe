"""Add of two activations -> PyTorch's ``quantized::add`` / ``add_relu``: ATen's binary32 kernel
(see :mod:`..aten`), whose vector body and scalar tails round differently. Mul by a constant
scalar -> ``quantized::mul`` (Scalar): ATen moves the factor into the output's qparams; Mul of
two activations -> ``quantized::mul`` (:mod:`.hard`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding, quantized_add
from quantemu.backends.onednn.lower.activation import activation_bounds, activation_suffix
from quantemu.backends.onednn.lower.context import (
    Context,
    U8Layer,
    mul_scalar_encoding,
    scalar_factor,
)
from quantemu.backends.onednn.lower.hard import QMulLayer, lower_mul_activations
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class QAddLayer(U8Layer):
    """PyTorch ``quantized::add`` (``add_relu``): ATen's float kernel (see :mod:`..aten`)."""

    input_encodings: tuple[TorchU8Encoding, TorchU8Encoding]
    relu: bool
    threads: int
    lo: int
    hi: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        a, b = (t.codes for t in inputs)
        encodings = (*self.input_encodings, self.encoding)
        y, saturated = quantized_add(a, b, encodings, relu=self.relu, threads=self.threads)
        if self.lo > 0 or self.hi < 255:  # a fused Clip: ATen's quantized clamp on the codes
            y = np.clip(y, self.lo, self.hi).astype(np.uint8)
        return LayerOutput(QTensor(y, self.encoding), {"output_saturated": saturated})


def _same_shape(sa, sb) -> bool:
    """Equal shapes, where a symbolic or unknown size matches any size but 1 (shape inference
    cannot name ``batch * 16`` after a flatten, so one side may be ``?``)."""
    return len(sa) == len(sb) and all(
        x == y or (not (isinstance(x, int) and isinstance(y, int)) and 1 not in (x, y))
        for x, y in zip(sa, sb, strict=True)
    )


def lower_add(ctx: Context, node: Node) -> QAddLayer:
    """Add of two activations of one shape -> ``quantized::add`` / ``add_relu``."""
    a, b = ctx.activation(node, 0), ctx.activation(node, 1)
    sa, sb = ctx.graph.tensors[a].shape, ctx.graph.tensors[b].shape
    if not _same_shape(sa, sb):
        raise NotLowerable(f"operand shapes {sa} and {sb} differ (broadcasting)")
    relu = node.attrs.get("activation") == "relu"
    # add_relu clamps in float before requantizing: no code bound is left to apply.
    lo, hi = (0, 255) if relu else activation_bounds(node, ctx.encodings[node.outputs[0]])
    return ctx.layer(
        QAddLayer,
        node,
        op=f"quantized::add{activation_suffix(node)} [aten]",
        inputs=(a, b),
        input_encodings=(ctx.encodings[a], ctx.encodings[b]),
        relu=relu,
        threads=ctx.options.threads,
        lo=lo,
        hi=hi,
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class QMulScalarLayer(U8Layer):
    """PyTorch ``quantized::mul`` by a Scalar ``c`` (ATen ``_mul_scalar_out``): no arithmetic on
    the codes; ``c > 0`` copies them, ``c < 0`` mirrors them (``255 - q``), ``c = 0`` zeroes
    them. The factor is in the output's encoding (``(|c|·s, zp)``)."""

    factor: float

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        q = inputs[0].codes
        if self.factor > 0:
            y = q.copy()
        elif self.factor < 0:
            y = (255 - q).astype(np.uint8)
        else:
            y = np.zeros_like(q)
        return LayerOutput(QTensor(y, self.encoding), {})


def lower_mul(ctx: Context, node: Node) -> QMulScalarLayer | QMulLayer:
    """Mul of an activation by a constant scalar -> ``quantized::mul`` (Scalar); of two
    activations -> ``quantized::mul`` (:mod:`.hard`)."""
    factor = scalar_factor(ctx.graph, node)
    if factor is None and not any(i in ctx.graph.initializers for i in node.inputs):
        return lower_mul_activations(ctx, node)
    if factor is None:
        raise NotLowerable("not a product of one activation and a constant scalar")
    x, c = factor
    want, out = mul_scalar_encoding(ctx.encodings[x], c), node.outputs[0]
    if want is None:
        raise NotLowerable(f"|{c}| times the input scale is no binary32 scale")
    if not ctx.encodings[out].same_params(want):
        raise NotLowerable(
            f"the file quantizes {out!r} as {ctx.encodings[out].describe()}; quantized::mul by "
            f"{c} gives {want.describe()}"
        )
    return ctx.layer(
        QMulScalarLayer, node, op="quantized::mul_scalar [aten]", inputs=(x,), factor=c
    )
