"""MEAN as xcore-opt 1.4.2 builds it: ``XC_mean`` over axes contiguous in the TFLite tensor.

A MEAN (ReduceMean, GlobalAveragePool) whose reduced axes are contiguous in the TFLite (NHWC)
tensor becomes ``XC_mean``'s float32 path (:mod:`quantemu.backends.xs3.xformer.mean`); other
axes keep TFLite-Micro's MEAN (the ``tflite`` rule).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.mean import XcMeanParams, mean_int8, xc_mean_params
from quantemu.graph.ir import Node
from quantemu.graph.tflite_import import NCHW_KEY
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

_NHWC_OF_NCHW = (0, 3, 1, 2)  # NCHW axis a is NHWC axis _NHWC_OF_NCHW[a]


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMeanLayer(Layer):
    """``XC_mean`` over the graph's ``axes`` (contiguous in the TFLite tensor)."""

    axes: tuple[int, ...]
    keepdims: bool
    params: XcMeanParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """lib_nn's ``mean_int8`` (exact sums, float32 requantization)."""
        y = mean_int8(inputs[0].codes, self.axes, self.keepdims, self.params)
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), {})


def _nhwc_axes(ctx: TfliteContext, name: str, axes: tuple[int, ...]) -> list[int]:
    """The reduced axes as the TFLite tensor numbers them (rank-4 NCHW values mapped back)."""
    graph = ctx.graph
    rank = len(ctx.shape(name))
    if graph.metadata.get("source_format") == "tflite":
        nchw = name in set(graph.metadata.get(NCHW_KEY, "").split("\n"))
    else:
        nchw = rank == 4  # a converter would hold an ONNX NCHW tensor as NHWC
    axes = [a % rank for a in axes]
    return sorted(_NHWC_OF_NCHW[a] for a in axes) if nchw and rank == 4 else sorted(axes)


def lower_xc_mean(ctx: TfliteContext, node: Node) -> Layer:
    """ReduceMean / GlobalAveragePool: ``XC_mean`` when the reduced TFLite axes are
    contiguous, else TFLite-Micro's MEAN."""
    base = tflite_rules.lower_mean(ctx, node)
    x = node.inputs[0]
    nhwc = _nhwc_axes(ctx, x, base.axes)
    if nhwc[-1] - nhwc[0] != len(nhwc) - 1:
        return dataclasses.replace(
            base, note=f"xcore-opt keeps MEAN over non-contiguous axes {nhwc}: TFLite-Micro's"
        )
    shape = ctx.shape(x)
    count = int(np.prod([shape[a] for a in base.axes]))
    e_in, e_out = ctx.encoding(x), base.encoding
    params = xc_mean_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point, count)
    return ctx.layer(
        XcMeanLayer,
        node,
        op="XC_mean",
        axes=base.axes,
        keepdims=base.keepdims,
        params=params,
        encoding=e_out,
    )


__all__ = ["XcMeanLayer", "lower_xc_mean"]
