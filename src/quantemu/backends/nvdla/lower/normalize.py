"""Normalizations: a standalone BatchNormalization on the SDP, LRN on the CDP.

A standalone BatchNormalization (one no conv absorbed) is the SDP's BS and BN units: BS MUL
multiplies the codes by the per-channel int16 ``scale_c`` (``scale_c 2^-shift ~= a_c s_in /
s_out``, shift shared, from the largest), BN ALU adds the per-channel offset ``b_c 2^shift /
s_out`` (int16 with ``BN_ALU_SHIFT_VALUE``, :func:`~..quantize.program_bn_mean`) and BN's
truncate divides by ``2^shift``.

LRN runs on the CDP: input converter to ``x * 2^m`` (9 bits), square sum over the window, the
LUT ``(k + alpha/size * ss)^-beta`` (quantemu's LE-exponential / LO-linear filling, as NVIDIA's
compiler fills no integer LUT), multiply by the centre, output converter to int8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.cdp import cdp
from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.lower.sdp import SdpLayer, SdpStage, channel_constant
from quantemu.backends.nvdla.lut_program import LutProgram, lrn_lut
from quantemu.backends.nvdla.quantize import (
    ScaleSplit,
    cdp_converter_fields,
    program_bn_mean,
    split_scales,
)
from quantemu.backends.nvdla.registers import AluAlgo, CdpRegisters, OperandSource, SdpRegisters
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.graph.ops.normalize import batchnorm_affine
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

LRN_OUT_SCALE = 2**14


def lower_batchnorm(ctx: NvdlaContext, node: Node) -> SdpLayer:
    """BatchNormalization (not folded into a conv) -> BS MUL per channel + BN ALU + truncate."""
    params = [channel_constant(ctx, node, n) for n in node.inputs[1:5]]
    a, b = batchnorm_affine(*params, node.attrs["epsilon"])
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    factors = (np.float32(s_in) * a / np.float32(enc.scale)).astype(np.float32)
    scales, shift = split_scales(factors, how=ctx.options.scale_split)
    offsets, alu_shift = program_bn_mean(-b.astype(np.float64), 2.0**shift / enc.scale)
    fields = {
        "BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.MEMORY),
        "BN_BYPASS": 0, "BN_ALU_BYPASS": 0, "BN_ALU_ALGO": int(AluAlgo.SUM),
        "BN_ALU_SRC": int(OperandSource.MEMORY), "BN_ALU_SHIFT_VALUE": alu_shift,
        "BN_MUL_SHIFT_VALUE": shift,
    }  # fmt: skip
    stage = SdpStage(SdpRegisters(**fields), {"BS_MUL": scales, "BN_ALU": offsets})
    note = f"per-channel scale 2^-{shift}, offset << {alu_shift}"
    return ctx.layer(SdpLayer, node, op="sdp_x_batchnorm", inputs=node.inputs[:1], note=note,
                     encoding=enc, stages=(stage,))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CdpLayer(Layer):
    """LRN on the CDP: registers and LUT tables derived at lowering time."""

    encoding: LinearEncoding
    regs: CdpRegisters
    lut: LutProgram

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The CDP over the channel axis (1) of the whole batch."""
        r = cdp(inputs[0].codes, self.regs, self.lut.le, self.lut.lo, axis=1)
        counters = {
            "output_saturated": r.OUT_SATURATION,
            "lut_underflow": r.PERF_LUT_UFLOW,
            "lut_overflow": r.PERF_LUT_OFLOW,
            "lut_hybrid": r.PERF_LUT_HYBRID,
            "lut_le_hit": r.PERF_LUT_LE_HIT,
            "lut_lo_hit": r.PERF_LUT_LO_HIT,
        }
        return LayerOutput(QTensor(np.asarray(r.y, np.int8), self.encoding), counters)


def lower_lrn(ctx: NvdlaContext, node: Node) -> CdpLayer:
    """LRN -> CDP with converters from seed 001's equations and the LRN LUT."""
    a = node.attrs
    size = int(a["size"])
    if size not in (3, 5, 7, 9):
        raise UnsupportedError(f"{node}: LRN size {size}; the CDP sums 3, 5, 7 or 9 channels")
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    # The input converter output is 9 bits in INT8: x * 2^m must stay within +-255.
    m = math.floor(math.log2(255.0 / (128 * s_in)))
    lut, err = lrn_lut(m=m, size=size, alpha=float(a["alpha"]), beta=float(a["beta"]),
                       k=float(a["bias"]), out_scale=LRN_OUT_SCALE)  # fmt: skip
    fields = cdp_converter_fields(
        o_in=0.0, sf_in=1 / s_in, m=m, sf_lut=LRN_OUT_SCALE, o_out=0.0, sf_out=1 / enc.scale,
        how=ScaleSplit.EXACT,
    )  # fmt: skip
    regs = lut.registers(INPUT_DATA_TYPE=0, NORMALZ_LEN=size // 2 - 1, **fields)
    note = f"LUT filled by quantemu (compiler fills none for INT8): max error {err:.0f} of 2^14"
    return ctx.layer(CdpLayer, node, op="cdp_lrn", inputs=node.inputs[:1], note=note,
                     encoding=enc, regs=regs, lut=lut)  # fmt: skip
