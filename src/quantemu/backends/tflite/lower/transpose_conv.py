"""``tflite`` layer and rule of ConvTranspose: TRANSPOSE_CONV
(:mod:`quantemu.backends.tflite.transpose_conv`), per-channel int8 weights.

TensorFlow's converter writes a Keras ``Conv2DTranspose`` as TRANSPOSE_CONV with the filter
quantized per output channel and an int32 bias, on the output's calibrated quantization, and
quantizes it as CONV_2D (the weights' axis is ONNX's axis 1, the output channel). The file can
only say SAME or VALID, so the padding before the image is ``floor(total / 2)`` or 0; an ONNX
ConvTranspose with other pads (PyTorch's ``padding=1, output_padding=1`` pads before by 1) is
what the converter writes as a VALID TRANSPOSE_CONV followed by a STRIDED_SLICE, whose codes
are the kernel's at the slice's positions: the layer computes those positions directly, from
the node's pads and output size. No groups, no dilation (TRANSPOSE_CONV has neither).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.layers import ConvLayer
from quantemu.backends.tflite.params import conv_params
from quantemu.backends.tflite.transpose_conv import transpose_conv2d
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class TransposeConvLayer(ConvLayer):
    """TRANSPOSE_CONV on NCHW codes: :class:`ConvLayer`'s fields with ``(C_in, C_out, kh, kw)``
    int8 weights and ONNX's pads (the kernel reads those before the image), and the output
    size."""

    output_size: tuple[int, int]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel; the counters say how many outputs were clamped."""
        geometry = {"strides": self.strides, "pads_before": self.pads[:2]}
        y, counters = transpose_conv2d(
            inputs[0].codes, self.weights, self.bias, self.params,
            output_size=self.output_size, **geometry,
        )  # fmt: skip
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


def lower_conv_transpose(ctx: TfliteContext, node: Node) -> Layer:
    """ConvTranspose (2-D, no groups, no dilation): TRANSPOSE_CONV (module docstring)."""
    a = node.attrs
    if int(a["group"]) != 1:
        raise NotLowerable(f"group={a['group']}: TFLite's TRANSPOSE_CONV has no groups")
    if tuple(a["dilations"]) != (1, 1):
        raise NotLowerable(f"dilations {tuple(a['dilations'])}: TRANSPOSE_CONV has none")
    x = node.inputs[0]
    size = tuple(ctx.shape(node.outputs[0])[2:])
    if len(size) != 2 or not all(isinstance(d, int) for d in size):
        raise NotLowerable(f"output size {size}: TRANSPOSE_CONV needs a known 2-D output shape")
    e_in, e_out = ctx.encoding(x), ctx.encoding(node.outputs[0])
    codes, s_w = ctx.weights(node, 1, axis=1)  # (C_in, C_out, kh, kw): per output channel
    params = conv_params(e_in.scale, e_in.zero_point, s_w, e_out.scale, e_out.zero_point)
    kernel = {
        "weights": np.ascontiguousarray(codes, np.int8),
        "bias": ctx.bias(node, 2, e_in.scale, s_w),
        "params": ctx.with_fused_activation(params, node, e_out),
    }
    geometry = {"strides": tuple(a["strides"]), "dilations": (1, 1), "pads": tuple(a["pads"])}
    return ctx.layer(
        TransposeConvLayer, node, op="TRANSPOSE_CONV", inputs=(x,), **kernel, **geometry,
        depthwise=False, output_size=size, encoding=e_out,
    )  # fmt: skip
