"""``tflite`` layer and rule of PRelu: PRELU (:mod:`quantemu.backends.tflite.prelu`).

TensorFlow's converter writes a Keras ``PReLU`` as PRELU with its slope a constant int8 tensor
on a per-tensor quantization of its own, derived from the slope's min/max as it derives any
constant operand of an elementwise operator (the same path as ADD's and MUL's constants,
:meth:`TfliteContext.operand`), and the output on its calibrated range. The slope broadcasts
against the NCHW codes as ONNX broadcasts it, so a ``(C, 1, 1)`` slope is per channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.prelu import PreluParams, prelu_int8, prelu_params
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class PreluLayer(Layer):
    """PRELU on NCHW codes with constant slope codes ``alpha`` (broadcast as ONNX does) on
    ``alpha_encoding``."""

    alpha: np.ndarray
    alpha_encoding: LinearEncoding
    params: PreluParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel; the counters say how many outputs were clamped."""
        y, counters = prelu_int8(inputs[0].codes, self.alpha, self.params)
        return LayerOutput(QTensor(y, self.encoding), counters)


def lower_prelu(ctx: TfliteContext, node: Node) -> Layer:
    """PRelu with a constant slope: PRELU (module docstring)."""
    x, slope = node.inputs[:2]
    if ctx.const(slope) is None:
        raise NotLowerable(
            f"slope {slope!r} is computed at run time; TensorFlow's converter writes PRELU "
            "with a constant alpha (a learned parameter): make the slope an initializer"
        )
    rank, slope_rank = len(ctx.shape(x)), np.ndim(ctx.const(slope))
    if slope_rank > rank:
        raise NotLowerable(f"slope of rank {slope_rank} on an input of rank {rank}")
    alpha, e_alpha = ctx.operand(slope)
    e_in, e_out = ctx.encoding(x), ctx.encoding(node.outputs[0])
    params = prelu_params(
        e_in.scale,
        e_in.zero_point,
        e_out.scale,
        e_out.zero_point,
        s_alpha=e_alpha.scale,
        z_alpha=e_alpha.zero_point,
        runtime=ctx.options.kernel_runtime,
    )
    slope_codes = {"alpha": np.ascontiguousarray(alpha, np.int8), "alpha_encoding": e_alpha}
    return ctx.layer(
        PreluLayer, node, op="PRELU", inputs=(x,), params=params, **slope_codes, encoding=e_out
    )
