"""Lower a float graph onto NVDLA's FP16 pipeline (``--option precision=fp16``).

NVDLA's FP16 mode needs no calibration: the compiler converts weights, biases and operands to
fp16 (round to nearest even) and programs every unit with ``*_PRECISION = 2``. Tensors are fp16
words (:class:`~quantemu.program.Fp16Encoding`). Every layer computes with the cmod's FP16
arithmetic, which is not IEEE (``backends/nvdla/README.md``, "FP16"):

=====================================  ===========================================================
graph op                               NVDLA FP16
=====================================  ===========================================================
Conv, Gemm, MatMul (constant weights)  CMAC + CACC (:mod:`.conv`), SDP bias and activation
Add, Sub, Mul                          SDP EW (:mod:`.elementwise`)
Relu, Clip, LeakyRelu, PRelu           SDP X units (:mod:`.activation`)
BatchNormalization (not folded)        SDP BS MUL + BN ALU
Sigmoid, Tanh                          SDP LUT with the compiler's FP16 tables (:mod:`.lut`)
LRN                                    CDP with the compiler's FP16 LE table
MaxPool, AveragePool, Global*Pool      PDP (:mod:`.pool`)
Concat; Flatten, Reshape, Transpose..  memory placement (:mod:`.layout`)
Softmax                                float32 on the CPU, output rounded to fp16 (exact=False)
=====================================  ===========================================================

Every layer also runs seed 001's FP16 threshold check against a local float reference
(:mod:`.check`), reported as the counter ``fp16_check_violations``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from quantemu._version import __version__
from quantemu.backends.nvdla.fp16.lower.activation import (
    lower_activation_fp16,
    lower_batchnorm_fp16,
    lower_prelu_fp16,
)
from quantemu.backends.nvdla.fp16.lower.conv import Fp16ConvLayer, lower_conv_fp16
from quantemu.backends.nvdla.fp16.lower.elementwise import Fp16EwLayer, lower_ew_fp16
from quantemu.backends.nvdla.fp16.lower.layout import lower_concat_fp16
from quantemu.backends.nvdla.fp16.lower.lut import Fp16CdpLayer, lower_lrn_fp16, lower_lut_fp16
from quantemu.backends.nvdla.fp16.lower.pool import (
    Fp16PdpLayer,
    lower_global_pool_fp16,
    lower_pool_fp16,
)
from quantemu.backends.nvdla.fp16.lower.sdp import Fp16SdpLayer
from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.lower.fallback import CPU_OPS, float_fallback
from quantemu.backends.nvdla.lower.layout import LAYOUT_OPS, lower_layout
from quantemu.backends.nvdla.lower.options import Options
from quantemu.backends.nvdla.lower.refusals import REFUSED
from quantemu.backends.nvdla.lower.rules import located
from quantemu.graph.ir import Graph
from quantemu.program import FP16, Fp16Encoding, Layer, LoweredModel
from quantemu.program.lowering import Rule, RuleTable

__all__ = ["RULES_FP16", "Fp16Context", "header_fp16", "lower_fp16"]


@dataclass
class Fp16Context(NvdlaContext):
    """The FP16 lowering's context: every tensor is fp16 words, whatever its range."""

    def new_encoding(self, tensor: str) -> Fp16Encoding:
        """fp16 words (FP16 needs no calibration)."""
        return FP16


#: The seed 001 check each layer kind runs (its note says which).
CHECKS = {
    Fp16ConvLayer: "CC DC threshold",
    Fp16SdpLayer: "SDP bit identity",
    Fp16EwLayer: "SDP bit identity",
    Fp16PdpLayer: "PDP thresholds",
    Fp16CdpLayer: "CDP thresholds",
}


def _noted(rule: Rule) -> Rule:
    """``rule`` whose layer's note names the seed's FP16 check it runs."""

    @functools.wraps(rule)
    def noted(ctx: Fp16Context, node) -> Layer:
        layer = rule(ctx, node)
        check = CHECKS.get(type(layer))
        if check is None:
            return layer
        note = f"{layer.note}; check: {check}" if layer.note else f"check: {check}"
        return dataclasses.replace(layer, note=note)

    return noted


_RULES = {
    "Conv": lower_conv_fp16,
    "Gemm": lower_conv_fp16,
    "MatMul": lower_conv_fp16,
    "Add": lower_ew_fp16,
    "Sub": lower_ew_fp16,
    "Mul": lower_ew_fp16,
    "Relu": lower_activation_fp16,
    "Clip": lower_activation_fp16,
    "LeakyRelu": lower_activation_fp16,
    "PRelu": lower_prelu_fp16,
    "BatchNormalization": lower_batchnorm_fp16,
    "Sigmoid": lower_lut_fp16,
    "Tanh": lower_lut_fp16,
    "LRN": lower_lrn_fp16,
    "MaxPool": lower_pool_fp16,
    "AveragePool": lower_pool_fp16,
    "GlobalAveragePool": lower_global_pool_fp16,
    "GlobalMaxPool": lower_global_pool_fp16,
    "Concat": lower_concat_fp16,
    **dict.fromkeys(LAYOUT_OPS, lower_layout),
}

#: The FP16 lowering: every rule, the CPU float fallback, the refusals.
RULES_FP16: RuleTable[Fp16Context] = RuleTable(
    rules={op: located(_noted(rule)) for op, rule in _RULES.items()},
    fallback=float_fallback,
    fallback_ops=CPU_OPS,
    unsupported=NvdlaContext.unsupported,
    refused=REFUSED,
)


def header_fp16(options: Options) -> dict[str, str]:
    """Every result-changing choice of an FP16 run, for report headers."""
    return {
        "backend": "nvdla",
        "model": "NVDLA v1 nv_full, FP16 (cmod nvdla/hw nvdlav1 8e06b1b9 semantics)",
        "quantization": "none: FP16 pipeline; weights, biases and operands to fp16 (round to "
        "nearest even); no calibration",
        "arithmetic": "cmod FP16, not IEEE: CMAC block floating point (Booth, truncated), CACC "
        "fp48, SDP fp32 (overflow to FLT_MAX, subnormals flushed), PDP fp17, fp16 output "
        "saturated at ±65504",
        "option.precision": options.precision.value,
        "checks": "seed 001 FP16 thresholds per layer against a local float reference "
        "(counter fp16_check_violations)",
        "semantics": "conformance/nvdla-fp16 (NVDLA cmod), backends/nvdla/README.md",
        "quantemu": __version__,
    }


def lower_fp16(graph: Graph, options: Options) -> LoweredModel:
    """Lower the optimized ``graph`` onto the FP16 pipeline (no ranges needed)."""
    ctx = Fp16Context(graph, {}, options, supported_ops=tuple(RULES_FP16.supported()))
    for info in graph.inputs:
        ctx.encodings[info.name] = FP16
    inputs = dict(ctx.encodings)
    return LoweredModel("nvdla", inputs, RULES_FP16.lower_graph(ctx), header_fp16(options))
