"""Pooling as xcore-opt 1.4.2 builds it.

- AVERAGE_POOL_2D -> a depthwise ``XC_conv2d_v2`` with every weight 1 and the filter scale
  ``float32(1 / (kh * kw))`` (``ReplaceAvgPoolWithConv2D.cpp``); SAME borders use the full
  window over zero-point padding (``XC_pad``), unlike TFLite. With channels not a multiple of
  4, or above the OT error threshold, the conv stays TFLite's DEPTHWISE_CONV_2D with those
  weights (still after the ``XC_pad``: checked on 1.4.2 with 3 channels). Its fused activation
  (a separate Clip node in the IR, :mod:`.lookup`) follows the conv rule: ignored when the
  output zero point is -128, else an ``XC_lookup`` (TFLite's clamp when the conv stays
  TFLite's).
- MAX_POOL_2D -> ``XC_maxpool2d``: the max of the raw codes over the window after ``XC_pad``
  with -128 (SAME), which equals TFLite's MAX_POOL_2D (padding never wins a max, and a SAME
  window always holds an image pixel), except that the XC op ignores a fused activation
  (checked on 1.4.2: a fused RELU with output zero point 1 let codes down to -50 through).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.layers import ConvLayer
from quantemu.backends.tflite.params import conv_params
from quantemu.backends.xs3.xformer.lower.conv import XcConv2dLayer, solve
from quantemu.backends.xs3.xformer.output_transform import OtKind
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.lowering import NotLowerable


def avgpool_as_conv(ctx: TfliteContext, node: Node):
    """``(unit weights, filter scales, OT or None)`` of the depthwise conv xcore-opt makes of
    an AveragePool; no OT when the conv stays TFLite's DEPTHWISE_CONV_2D: channels not a
    multiple of 4 (the channel-padding pattern wants a quantized bias, and the pool's
    replacement has a plain int32 one, so the conv is never aligned), or an OT error above
    the threshold."""
    channels = ctx.shape(node.inputs[0])[1]
    kh, kw = (int(k) for k in node.attrs["kernel_shape"])
    ones = np.ones((channels, 1, kh, kw), np.int8)
    s_w = np.full(channels, np.float32(1.0 / (kh * kw)), np.float32)
    if channels % 4:
        return ones, s_w, None
    e_in = ctx.encoding(node.inputs[0])
    ot = solve(ctx, ones[:, 0], None, s_w, (e_in, ctx.same_as_input(node)))
    return ones, s_w, None if ot.kind is OtKind.REVERT_TO_TFLITE else ot


def lower_xc_avgpool(ctx: TfliteContext, node: Node) -> Layer:
    """AveragePool: a depthwise ``XC_conv2d_v2`` with unit weights, or TFLite's
    DEPTHWISE_CONV_2D with them (:func:`avgpool_as_conv`); both over zero-point padding."""
    if node.attrs["ceil_mode"]:
        # xcore-opt averages over zero-point padding (a full window); what a converter makes of
        # a ceil-mode overhang is not known, so no answer is given rather than a guessed one.
        raise NotLowerable("ceil_mode average pooling (no TFLite form xcore-opt is known to get)")
    base = tflite_rules.lower_pool(ctx, node)  # checks, geometry, output encoding
    e_in, e_out = ctx.encoding(node.inputs[0]), base.encoding
    ones, s_w, ot = avgpool_as_conv(ctx, node)
    geometry = {"strides": base.strides, "dilations": (1, 1), "pads": base.pads}
    if ot is None:
        params = conv_params(e_in.scale, e_in.zero_point, s_w, e_out.scale, e_out.zero_point)
        note = "AVERAGE_POOL_2D as xcore-opt's depthwise conv, left to TFLite (unaligned or OT)"
        return ctx.layer(
            ConvLayer,
            node,
            op="DEPTHWISE_CONV_2D",
            note=note,
            weights=ones,
            bias=None,
            params=params,
            depthwise=True,
            encoding=e_out,
            **geometry,
        )
    return ctx.layer(
        XcConv2dLayer,
        node,
        op="XC_conv2d_v2",
        note="AVERAGE_POOL_2D as xcore-opt's depthwise conv (SAME borders average zero points)",
        weights=ones,
        depthwise=True,
        pad_value=int(e_in.zero_point),
        ot=ot,
        rounding=ctx.options.vlashr,
        table=None,
        encoding=e_out,
        **geometry,
    )


def lower_xc_maxpool(ctx: TfliteContext, node: Node) -> Layer:
    """MaxPool: ``XC_maxpool2d``, which computes TFLite's MAX_POOL_2D (module docstring)."""
    base = tflite_rules.lower_pool(ctx, node)
    return dataclasses.replace(base, op="XC_maxpool2d")


__all__ = ["avgpool_as_conv", "lower_xc_avgpool", "lower_xc_maxpool"]
