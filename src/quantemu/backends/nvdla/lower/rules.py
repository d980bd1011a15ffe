"""The NVDLA rule table: graph op type -> rule, the ops that run on the CPU, and the errors.

=====================================  ================================================
graph op                               NVDLA
=====================================  ================================================
Conv, Gemm, MatMul (constant weights)  CMAC + CACC + SDP (bias BS ALU, rescale, ReLU)
Add, Sub, Mul                          SDP Y (EW ALU SUM / MUL PROD with converters)
Relu, Clip, LeakyRelu, PRelu           SDP X units (standalone activations)
BatchNormalization (not folded)        SDP BS MUL + BN ALU
Sigmoid, Tanh                          SDP Y LUT (programmed by quantemu)
MaxPool, AveragePool, Global*Pool      PDP (global pools in stages of kernels <= 8)
LRN                                    CDP
Concat                                 memory placement (+ SDP requantization)
Flatten, Reshape, Transpose            memory layout
Softmax                                float32 on the CPU (exact=False)
=====================================  ================================================

A rule raises :class:`~quantemu.program.lowering.NotLowerable` only where nvdla/sw would run
the node on the CPU (a global pool the PDP cannot factor); what NVDLA cannot run at all is an
:class:`~quantemu.errors.UnsupportedError`. An :class:`~quantemu.errors.InvalidInputError` a
rule meets (a scale the converters cannot hold, say) is re-raised naming the node.
"""

from __future__ import annotations

import functools

from quantemu.backends.nvdla.lower.activation import lower_activation, lower_lut, lower_prelu
from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.lower.conv import lower_conv
from quantemu.backends.nvdla.lower.elementwise import lower_ew
from quantemu.backends.nvdla.lower.fallback import CPU_OPS, float_fallback
from quantemu.backends.nvdla.lower.layout import LAYOUT_OPS, lower_concat, lower_layout
from quantemu.backends.nvdla.lower.normalize import lower_batchnorm, lower_lrn
from quantemu.backends.nvdla.lower.pool import lower_global_pool, lower_pool
from quantemu.backends.nvdla.lower.refusals import REFUSED
from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.lowering import Rule, RuleTable


def located(rule: Rule) -> Rule:
    """``rule`` whose input errors name the node (those from the context already say where)."""

    @functools.wraps(rule)
    def located(ctx: NvdlaContext, node: Node) -> Layer:
        try:
            return rule(ctx, node)
        except InvalidInputError as exc:
            if str(exc).startswith("nvdla lowering"):
                raise
            raise InvalidInputError(f"nvdla lowering of {node}: {exc}") from exc

    return located


_RULES: dict[str, Rule] = {
    "Conv": lower_conv,
    "Gemm": lower_conv,
    "MatMul": lower_conv,
    "Add": lower_ew,
    "Sub": lower_ew,
    "Mul": lower_ew,
    "Relu": lower_activation,
    "Clip": lower_activation,
    "LeakyRelu": lower_activation,
    "PRelu": lower_prelu,
    "BatchNormalization": lower_batchnorm,
    "Sigmoid": lower_lut,
    "Tanh": lower_lut,
    "MaxPool": lower_pool,
    "AveragePool": lower_pool,
    "GlobalAveragePool": lower_global_pool,
    "GlobalMaxPool": lower_global_pool,
    "LRN": lower_lrn,
    "Concat": lower_concat,
    **dict.fromkeys(LAYOUT_OPS, lower_layout),
}

#: The NVDLA lowering: every rule, the CPU float fallback, the unsupported-op error.
RULES: RuleTable[NvdlaContext] = RuleTable(
    rules={op: located(rule) for op, rule in _RULES.items()},
    fallback=float_fallback,
    fallback_ops=CPU_OPS,
    unsupported=NvdlaContext.unsupported,
    refused=REFUSED,
)
