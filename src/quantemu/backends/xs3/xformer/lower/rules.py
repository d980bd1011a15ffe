"""The xformer rule table: the ``tflite`` rules, with the operators xcore-opt 1.4.2 rewrites.

The TFLite int8 view of the graph (the model's own quantization, or TensorFlow's converter
rules) comes from the shared :class:`~quantemu.backends.xs3.lower.context.Xs3Context`; every
operator xformer leaves to the runtime's builtin kernels runs TFLite-Micro's reference kernel
(the ``tflite`` backend's rule, as TFLite-Micro through ``Options.kernel_runtime``):
SQUARED_DIFFERENCE, RSQRT, MINIMUM, MAXIMUM, PAD, CONCATENATION, ... (xcore-opt 1.4.2 compiles
them unchanged: ``elementwise_peer_vectors.json``). The operators it rewrites:

=================================  ======================================================
graph op                           XS3 layer (module)
=================================  ======================================================
Conv, Gemm, MatMul (constant B)    ``XC_conv2d_v2`` or the reverted TFLite op (:mod:`.conv`)
Add, Sub, Mul                      ``XC_add`` / ``XC_mul`` (:mod:`.elementwise`)
Relu, Clip, Tanh, Sigmoid, ...     ``XC_lookup`` (:mod:`.lookup`)
ReduceMean, GlobalAveragePool      ``XC_mean`` (:mod:`.mean`)
AveragePool, MaxPool               a depthwise ``XC_conv2d_v2``, ``XC_maxpool2d`` (:mod:`.pool`)
Softmax                            ``XC_softmax`` / ``XC_batched_softmax`` (:mod:`.softmax`)
MatMul of activations, Gelu        refused as xcore-opt refuses them (:mod:`.refusals`)
TfliteCustom                       an XC op of a compiled model (:mod:`.compiled`)
=================================  ======================================================

A MINIMUM and RELU that xcore-opt fuses into the convolution before them only pass its codes on
(:mod:`.fuse`).
"""

from __future__ import annotations

from quantemu.backends.refusals import recurrent_refusals
from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.lower import fuse
from quantemu.backends.xs3.xformer.lower.compiled import lower_compiled
from quantemu.backends.xs3.xformer.lower.conv import lower_xc_conv
from quantemu.backends.xs3.xformer.lower.elementwise import lower_xc_add, lower_xc_mul
from quantemu.backends.xs3.xformer.lower.lookup import UNARY, lower_xc_lookup
from quantemu.backends.xs3.xformer.lower.mean import lower_xc_mean
from quantemu.backends.xs3.xformer.lower.pool import lower_xc_avgpool, lower_xc_maxpool
from quantemu.backends.xs3.xformer.lower.refusals import (
    lower_xmos_resize,
    refuse_conv_transpose,
    refuse_gelu,
)
from quantemu.backends.xs3.xformer.lower.softmax import lower_xc_softmax
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.lowering import RuleTable


def _unless_absorbed(rule):
    """``rule``, except for a node xcore-opt fused into the convolution before it."""

    def lower(ctx: TfliteContext, node: Node) -> Layer:
        return fuse.pass_on(ctx, node) if fuse.is_absorbed(ctx, node) else rule(ctx, node)

    lower.__doc__ = rule.__doc__
    return lower


_RULES = {
    **tflite_rules.RULES.rules,
    "Conv": lower_xc_conv,
    "Gemm": lower_xc_conv,
    "MatMul": lower_xc_conv,
    "TfliteCustom": lower_compiled,
    "Add": lower_xc_add,
    "Sub": lower_xc_add,
    **dict.fromkeys(("Relu", "Clip", *UNARY), lower_xc_lookup),
    "ReduceMean": lower_xc_mean,
    "GlobalAveragePool": lower_xc_mean,
    "AveragePool": lower_xc_avgpool,
    "MaxPool": lower_xc_maxpool,
    "Gelu": refuse_gelu,
    "ConvTranspose": refuse_conv_transpose,
    "Resize": lower_xmos_resize,
    "Mul": lower_xc_mul,
    "Softmax": lower_xc_softmax,
}
RULES: RuleTable[TfliteContext] = RuleTable(
    rules={**_RULES, **{op: _unless_absorbed(_RULES[op]) for op in ("Min", "Relu")}},
    unsupported=tflite_rules.unsupported,
    refused={**recurrent_refusals("xs3"), "BorderPad": tflite_rules.BORDER_PAD_REFUSAL},
)

__all__ = ["RULES"]
