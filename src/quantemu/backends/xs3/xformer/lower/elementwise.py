"""ADD, SUB and MUL as xcore-opt 1.4.2 builds them: ``XC_add`` / ``XC_mul``, then ``XC_lookup``.

``TFLPatterns.td`` first splits a fused RELU / RELU6 off the op (an ``XC_lookup`` on its output
quantization, whatever its zero point: :mod:`.unfuse`) and gives an operand whose shape differs
from the output's a BROADCAST_TO: ``XC_broadcast``, or TFLite's BROADCAST_TO where the broadcast
axes are not consecutive (checked on 1.4.2); either is a copy, so NumPy broadcasting stands for
it. Then:

- ADD / SUB become ``XC_add`` (:mod:`quantemu.backends.xs3.xformer.add`);
- ``ReplaceMul.cpp`` turns every MUL whose operands and output are int8 into ``XC_mul`` with
  ``mul_boggle``'s parameters (:mod:`quantemu.backends.xs3.xformer.mul`). A MUL with other
  types stays TFLite's, run by TFLite-Micro's kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.add import XcAddParams, add_elementwise_int8, xc_add_params
from quantemu.backends.xs3.xformer.lower.unfuse import binary_table, looked_up
from quantemu.backends.xs3.xformer.mul import XcMulParams, xc_mul_host, xc_mul_params
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

NOTE_BROADCAST = "an operand is copied to the output shape first (XC_broadcast)"
NOTE_KEPT = "xcore-opt keeps this MUL (not int8 per-tensor): TFLite-Micro's reference kernel"


@dataclass(frozen=True, eq=False, kw_only=True)
class XcBinaryLayer(Layer):
    """An element-wise XC op on two operands (a constant one held as codes), then the
    split-out ``XC_lookup``, if any; :meth:`arithmetic` is the op's."""

    constants: tuple[np.ndarray | None, np.ndarray | None]
    table: np.ndarray | None
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Broadcast (a copy), the op's kernel, then the split-out activation's table."""
        fed = iter(inputs)
        a, b = (c if c is not None else next(fed).codes for c in self.constants)
        y, counters = looked_up(self.table, self.arithmetic(a, b))
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), counters)

    def arithmetic(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The op on the broadcast operands' codes."""
        raise NotImplementedError


@dataclass(frozen=True, eq=False, kw_only=True)
class XcAddLayer(XcBinaryLayer):
    """``XC_add``: lib_nn's ``add_elementwise``."""

    params: XcAddParams

    def arithmetic(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """lib_nn's ``add_elementwise`` (SUB through its parameters)."""
        return add_elementwise_int8(a, b, self.params)


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMulLayer(XcBinaryLayer):
    """``XC_mul`` as the host interpreter computes it (``mul_elementwise_ref``)."""

    params: XcMulParams

    def arithmetic(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """lib_nn's ``mul_elementwise_ref``, as the x86 host build runs it."""
        return xc_mul_host(a, b, self.params)


def lower_xc_add(ctx: TfliteContext, node: Node) -> Layer:
    """Add / Sub: ``XC_add`` and the split-out activation."""
    (c1, e1), (c2, e2) = (ctx.operand(n) for n in node.inputs[:2])
    base = tflite_rules.lower_binary(ctx, node)  # its checks, constants and output encoding
    e_out = base.encoding
    params = xc_add_params(
        e1.scale,
        e1.zero_point,
        e2.scale,
        e2.zero_point,
        e_out.scale,
        e_out.zero_point,
        subtract=node.op_type == "Sub",
    )
    table = binary_table(node, e_out)
    return ctx.layer(
        XcAddLayer,
        node,
        op="XC_add" if table is None else "XC_add+XC_lookup",
        inputs=base.inputs,
        params=params,
        constants=(c1, c2),
        table=table,
        encoding=e_out,
    )


def _per_tensor_int8(e: LinearEncoding) -> bool:
    return e.dtype == "int8" and e.axis is None and np.size(e.scale) == 1


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
        table=binary_table(node, e_out),
        encoding=e_out,
    )


__all__ = ["XcAddLayer", "XcBinaryLayer", "XcMulLayer", "lower_xc_add", "lower_xc_mul"]
