"""Mul as xcore-opt 1.4.2 builds it: ``XC_mul`` (after ``XC_broadcast``), then ``XC_lookup``.

``TFLPatterns.td`` first splits a fused RELU / RELU6 off the MUL (an ``XC_lookup`` on the MUL's
output quantization, whatever its zero point) and gives an operand whose shape differs from the
output's a BROADCAST_TO: ``XC_broadcast``, or TFLite's BROADCAST_TO where the broadcast axes
are not consecutive (checked on 1.4.2); either is a copy, so NumPy broadcasting stands for it.
``ReplaceMul.cpp`` then turns every MUL whose operands and output are int8 into ``XC_mul``
with ``mul_boggle``'s parameters (:mod:`quantemu.backends.xs3.xformer.mul`). A MUL with other
types stays TFLite's, run by TFLite-Micro's kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.lookup import lookup8, lookup_table_int8
from quantemu.backends.xs3.xformer.mul import XcMulParams, xc_mul_host, xc_mul_params
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

NOTE_BROADCAST = "an operand is copied to the output shape first (XC_broadcast)"
NOTE_KEPT = "xcore-opt keeps this MUL (not int8 per-tensor): TFLite-Micro's reference kernel"


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMulLayer(Layer):
    """``XC_mul`` as the host interpreter computes it; a constant operand is held as codes."""

    params: XcMulParams
    constants: tuple[np.ndarray | None, np.ndarray | None]
    table: np.ndarray | None  # the XC_lookup split off a fused RELU / RELU6, if any
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Broadcast (a copy), lib_nn's multiply, then the split-out activation's table."""
        fed = iter(inputs)
        a, b = (c if c is not None else next(fed).codes for c in self.constants)
        y = xc_mul_host(a, b, self.params)
        counters = {}
        if self.table is not None:
            looked = lookup8(y, self.table)
            counters["activation_clamped"] = int(np.count_nonzero(looked != y))
            y = looked
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), counters)


def _per_tensor_int8(e: LinearEncoding) -> bool:
    return e.dtype == "int8" and e.axis is None and np.size(e.scale) == 1


def _activation_table(node: Node, e_out: LinearEncoding) -> np.ndarray | None:
    """The ``XC_lookup`` xcore-opt makes of a fused RELU or RELU6, on the output's encoding."""
    kind = node.attrs.get("activation")
    if kind is None:
        return None
    s, z = float(e_out.scale), int(e_out.zero_point)
    if kind == "relu":
        return lookup_table_int8("relu", s, z, s, z)
    bounds = (float(node.attrs["activation_min"]), float(node.attrs["activation_max"]))
    if kind == "clip" and bounds == (0.0, 6.0):
        return lookup_table_int8("relu6", s, z, s, z)
    # RELU_N1_TO_1 would stay a TFLite op after the XC_mul: not modelled
    raise NotLowerable(f"fused activation {kind} {bounds} after XC_mul (no XC_lookup for it)")


def lower_xc_mul(ctx: TfliteContext, node: Node) -> Layer:
    """Mul: ``XC_mul`` (+ the ``XC_lookup`` of a fused RELU / RELU6), else TFLite's MUL."""
    base = tflite_rules.lower_binary(ctx, node)  # its checks, constants and output encoding
    (_, e1), (_, e2) = (ctx.operand(n) for n in node.inputs[:2])
    e_out = base.encoding
    if not all(_per_tensor_int8(e) for e in (e1, e2, e_out)):
        return dataclasses.replace(base, note=NOTE_KEPT)
    params = xc_mul_params(
        e1.scale,
        e2.scale,
        e_out.scale,
        int(e1.zero_point),
        int(e2.zero_point),
        int(e_out.zero_point),
    )
    out_shape = tuple(ctx.shape(node.outputs[0]))
    shapes = (
        tuple(ctx.shape(n)) if c is None else c.shape
        for c, n in zip(base.constants, node.inputs[:2], strict=True)
    )
    copied = any(s != out_shape for s in shapes)
    return ctx.layer(
        XcMulLayer,
        node,
        op="XC_mul",
        note=NOTE_BROADCAST if copied else "",
        params=params,
        constants=base.constants,
        table=_activation_table(node, e_out),
        encoding=e_out,
    )


__all__ = ["XcMulLayer", "lower_xc_mul"]
