"""MobileNetV3's ops as PyTorch's x86 FX flow quantizes them (:mod:`..hard_ops`): HardSwish ->
``quantized::hardswish`` (output qparams from the calibrated range), HardSigmoid -> the
fixed-qparams ``quantized::hardsigmoid`` (``(1/256, 0)``, assigned in :mod:`.context`), and the
squeeze-excite product of two activations -> ``quantized::mul`` (its own observed qparams)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.hard_ops import (
    HARDSIGMOID_QPARAMS,
    quantized_hardsigmoid,
    quantized_hardswish,
    quantized_mul,
)
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable

#: ``nn.Hardsigmoid`` as both exporters write it: ``HardSigmoid(alpha=f32(1/6), beta=0.5)``.
_TORCH_HARDSIGMOID = (float(np.float32(1 / 6)), 0.5)


def _qparams(enc: TorchU8Encoding) -> tuple[float, int]:
    return enc.scale, enc.zp


@dataclass(frozen=True, eq=False, kw_only=True)
class QHardLayer(U8Layer):
    """PyTorch ``quantized::hardswish`` (``swish``) or ``quantized::hardsigmoid``: ATen's float
    kernel, vector body and scalar tails (:mod:`..hard_ops`); 4-D tensors channels-last."""

    input_encoding: TorchU8Encoding
    swish: bool
    threads: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        q, xq = inputs[0].codes, _qparams(self.input_encoding)
        layout = {"threads": self.threads, "channels_last": q.ndim == 4}
        if self.swish:
            y, sat = quantized_hardswish(
                q, x_qparams=xq, y_qparams=_qparams(self.encoding), **layout
            )
        else:
            y, sat = quantized_hardsigmoid(q, x_qparams=xq, **layout)
        return LayerOutput(QTensor(y, self.encoding), {"output_saturated": sat})


def _hard_layer(ctx: Context, node: Node, *, swish: bool) -> QHardLayer:
    x = ctx.activation(node)
    return ctx.layer(
        QHardLayer,
        node,
        op=f"quantized::{'hardswish' if swish else 'hardsigmoid'} [aten]",
        inputs=(x,),
        input_encoding=ctx.encodings[x],
        swish=swish,
        threads=ctx.options.threads,
    )


def lower_hardswish(ctx: Context, node: Node) -> QHardLayer:
    """HardSwish -> ``quantized::hardswish``."""
    return _hard_layer(ctx, node, swish=True)


def lower_hardsigmoid(ctx: Context, node: Node) -> QHardLayer:
    """HardSigmoid with PyTorch's ``alpha = 1/6``, ``beta = 0.5`` -> ``quantized::hardsigmoid``,
    whose output is quantized with the fixed ``(1/256, 0)``."""
    got = (float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5)))
    if got != _TORCH_HARDSIGMOID:
        raise NotLowerable(f"alpha, beta = {got}, not nn.Hardsigmoid's {_TORCH_HARDSIGMOID}")
    fixed, out = TorchU8Encoding(*HARDSIGMOID_QPARAMS), node.outputs[0]
    if not ctx.encodings[out].same_params(fixed):
        raise NotLowerable(
            f"the file quantizes {out!r} as {ctx.encodings[out].describe()}; "
            f"quantized::hardsigmoid gives {fixed.describe()}"
        )
    return _hard_layer(ctx, node, swish=False)


@dataclass(frozen=True, eq=False, kw_only=True)
class QMulLayer(U8Layer):
    """PyTorch ``quantized::mul`` of two activations (NumPy broadcasting): ATen's integer
    product, requantized once (:func:`..hard_ops.quantized_mul`)."""

    input_encodings: tuple[TorchU8Encoding, TorchU8Encoding]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        (a, b), (ea, eb) = (t.codes for t in inputs), self.input_encodings
        y, sat = quantized_mul(
            a, b, a_qparams=_qparams(ea), b_qparams=_qparams(eb), y_qparams=_qparams(self.encoding)
        )
        return LayerOutput(QTensor(y, self.encoding), {"output_saturated": sat})


def lower_mul_activations(ctx: Context, node: Node) -> QMulLayer:
    """Mul of two activations (broadcasting, no fused activation) -> ``quantized::mul``."""
    if node.attrs.get("activation"):
        raise NotLowerable(f"fused activation {node.attrs['activation']!r}")
    a, b = ctx.activation(node, 0), ctx.activation(node, 1)
    return ctx.layer(
        QMulLayer,
        node,
        op="quantized::mul [aten]",
        inputs=(a, b),
        input_encodings=(ctx.encodings[a], ctx.encodings[b]),
    )
