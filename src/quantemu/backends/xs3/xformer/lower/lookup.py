"""Standalone activations as xcore-opt 1.4.2 builds them: ``XC_lookup``.

RELU, RELU6, TANH, LOGISTIC, HARD_SWISH, LEAKY_RELU and an int8 -> int8 QUANTIZE become
``XC_lookup`` (:mod:`quantemu.backends.xs3.xformer.lookup`): a 256-entry table xcore-opt computes
in double, indexed by each code. A Clip that is a pooling layer's fused activation in the file
follows its pool: ``XC_maxpool2d`` ignores it, and the depthwise conv xcore-opt makes of an
AVERAGE_POOL_2D treats it as a conv's activation (:mod:`.pool`). Other Clips keep TFLite-Micro's
kernel (the ``tflite`` rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.lookup import lookup8, lookup_table_int8
from quantemu.backends.xs3.xformer.lower.pool import avgpool_as_conv
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor


@dataclass(frozen=True, eq=False, kw_only=True)
class XcLookupLayer(Layer):
    """``XC_lookup``: ``y = table[uint8(x)]``."""

    table: np.ndarray
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """One gather."""
        return LayerOutput(QTensor(lookup8(inputs[0].codes, self.table), self.encoding), {})


UNARY = {
    "Relu": "relu",
    "Tanh": "tanh",
    "Sigmoid": "logistic",
    "HardSwish": "hard_swish",
    "LeakyRelu": "leaky_relu",
}


def _clip_kind(ctx: TfliteContext, node: Node, e_out: LinearEncoding) -> str | None:
    """What xcore-opt makes of a Clip: a table kind, ``identity``, or None (TFLite's op)."""
    a = node.attrs
    source = a.get("tflite_op")
    bounds = (float(a["min"]), float(a["max"]))
    if source == "QUANTIZE":
        return "identity"  # int8 -> int8 requantization: a table of the identity
    if source == "MAX_POOL_2D":
        return "none"  # XC_maxpool2d ignores the fused activation
    if source == "AVERAGE_POOL_2D":  # the depthwise conv's activation (:mod:`.pool`)
        pool = ctx.graph.producer(node.inputs[0])
        if pool is None or avgpool_as_conv(ctx, pool)[2] is None:
            return None  # TFLite's DEPTHWISE_CONV_2D applies it: TFLite's clamp
        if int(e_out.zero_point) == -128:
            return "none"
        return "relu" if bounds[1] == np.inf else "clip"
    if bounds == (0.0, 6.0) and source in (None, "RELU6"):
        return "relu6"
    return None


def lower_xc_lookup(ctx: TfliteContext, node: Node) -> Layer:
    """Relu, Clip (RELU6, QUANTIZE, a pool's activation), Tanh, Sigmoid, HardSwish,
    LeakyRelu: ``XC_lookup``; other Clips keep TFLite-Micro's kernel."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.output_encoding(node)
    a = node.attrs
    bounds = (0.0, 6.0)
    if node.op_type == "Clip":
        kind = _clip_kind(ctx, node, e_out)
        if kind is None:
            return tflite_rules.lower_relu(ctx, node)
        if kind != "relu6":
            bounds = (float(a["min"]), float(a["max"]))
    else:
        kind = UNARY[node.op_type]
    if kind == "none":
        kind, note = "identity", "xcore-opt drops this fused activation (the XC op only saturates)"
    else:
        note = ""
    table = lookup_table_int8(
        kind,
        e_in.scale,
        e_in.zero_point,
        e_out.scale,
        e_out.zero_point,
        alpha=float(a.get("alpha", 0.0)),
        bounds=bounds,
    )
    op = "XC_lookup" if not note else "dropped_activation"
    return ctx.layer(XcLookupLayer, node, op=op, note=note, table=table, encoding=e_out)


__all__ = ["UNARY", "XcLookupLayer", "lower_xc_lookup"]
