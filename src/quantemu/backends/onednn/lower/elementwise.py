"""Add of two activations -> PyTorch's ``quantized::add`` / ``add_relu``: ATen's binary32 kernel
(see :mod:`..aten`), whose vector body and scalar tails round differently."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding, quantized_add
from quantemu.backends.onednn.lower.activation import activation_bounds, activation_suffix
from quantemu.backends.onednn.lower.context import Context, U8Layer
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
