"""Conv -> PyTorch's ``quantized::conv2d`` (``_relu``): oneDNN's int8 convolution, then the f32
requantization (page §6), with the kernel families predicted by :mod:`..family` or chosen by the
options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from quantemu.backends.onednn.conv import conv2d
from quantemu.backends.onednn.family import predict_conv_impl, predict_quantized_conv2d_impl
from quantemu.backends.onednn.lower.context import Context
from quantemu.backends.onednn.lower.quantized import (
    QuantizedLayer,
    quantized_layer,
    quantized_weights,
    requantization,
)
from quantemu.backends.onednn.params import (
    Conv2dParams,
    ConvGeometry,
    ConvImpl,
    QuantizedConv2dParams,
    QuantizedImpl,
    SrcType,
)
from quantemu.backends.onednn.requant import requantize_f32
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class QConv2dLayer(QuantizedLayer):
    """PyTorch ``quantized::conv2d`` (``_relu``) on oneDNN: ``conv2d`` then ``requantize``.

    ``conv.impl`` is the accumulator's kernel family (pairing order on non-VNNI ISAs),
    ``params.impl`` the requantization's f32 order. ``weight``: int8 (O, C/groups, KH, KW).
    """

    torch_op: ClassVar[str] = "conv2d"
    conv: Conv2dParams
    params: QuantizedConv2dParams

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        res = conv2d(inputs[0].codes, self.weight, self.conv)
        v = requantize_f32(
            res.acc, 1, self.params.quant, self.params.impl, w_round_trip=False, bias=self.bias
        )
        return self.result(res.acc, res.saturated_pairs, v)


def _families(ctx: Context, node: Node, x_shape, w_shape, geometry: ConvGeometry):
    """``(quantized_conv_impl, conv_impl)``: the options' choice, else oneDNN's predicted one
    (``ref`` in either pins both)."""
    opts = ctx.options
    q_impl = opts.pick("quantized_conv_impl", node.name)
    c_impl = opts.pick("conv_impl", node.name)
    if q_impl is None:
        q_impl = (
            QuantizedImpl.REF
            if c_impl is ConvImpl.REF
            else predict_quantized_conv2d_impl(opts.isa, x_shape, w_shape, geometry)
        )
    if c_impl is None:
        c_impl = (
            ConvImpl.REF
            if q_impl is QuantizedImpl.REF
            else predict_conv_impl(
                opts.isa, SrcType.U8, x_shape, w_shape, geometry, host_has_vbmi=opts.host_has_vbmi
            )
        )
    return q_impl, c_impl


def lower_conv(ctx: Context, node: Node) -> QConv2dLayer:
    """Conv -> ``quantized::conv2d`` with the predicted (or chosen) kernel families."""
    x = ctx.activation(node)
    w = ctx.constant(node, 1, "weight")
    bias = ctx.constant(node, 2, "bias") if len(node.inputs) > 2 and node.inputs[2] else None
    shape = ctx.shape(x)
    if not all(isinstance(d, int) for d in shape[1:]):
        raise NotLowerable(f"input {x} has a symbolic spatial shape {shape}")
    a = node.attrs
    geometry = ConvGeometry(a["strides"], a["pads"], a["dilations"], a["group"])
    codes, scales = quantized_weights(ctx, node, w)
    q_impl, c_impl = _families(ctx, node, (1, *shape[1:]), w.shape, geometry)
    quant = requantization(ctx, x, node.outputs[0], scales)
    isa = ctx.options.isa
    return quantized_layer(
        ctx,
        node,
        QConv2dLayer,
        x,
        f"{q_impl.value}, {c_impl.value}",
        weight=codes,
        bias=bias,
        conv=Conv2dParams(isa, SrcType.U8, c_impl, geometry, quant.x_zero_point),
        params=QuantizedConv2dParams(isa, q_impl, quant, geometry),
    )
