"""The LUT ops in FP16 with the tables NVIDIA's compiler programs
(:mod:`~quantemu.backends.nvdla.fp16.lut_program`).

Sigmoid and Tanh are one SDP pass through the EW unit's LUT (LO linear table, fp17
interpolation). LRN runs on the CDP: the fp32 square sum over ``size`` channels, the LE
exponential table of ``(k + alpha/size * ss)^-beta``, the fp17 multiply by the centre. The
threshold checks are the seed's SDP rule (bit identity) and CDP rule (with each output's largest
magnitude in its channel window).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.fp16.cdp import cdp_fp16
from quantemu.backends.nvdla.fp16.lower.check import Fp16Check, fp16_values
from quantemu.backends.nvdla.fp16.lower.sdp import Fp16SdpLayer, fp16_pass
from quantemu.backends.nvdla.fp16.lut_program import lrn_fp16_lut, sdp_fp16_lut
from quantemu.backends.nvdla.fp16.sdp import nan_outputs, saturated_fp16
from quantemu.backends.nvdla.registers import CdpRegisters, Precision
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext

_EW_LUT = {"EW_BYPASS": 0, "EW_LUT_BYPASS": 0}


def lower_lut_fp16(ctx: LoweringContext, node: Node) -> Fp16SdpLayer:
    """Sigmoid / Tanh -> the SDP LUT with the compiler's FP16 table."""
    fields, le, lo = sdp_fp16_lut(node.op_type)
    note = "SDP LUT: the compiler's FP16 LO table (257 entries), fp17 interpolation"
    return ctx.layer(Fp16SdpLayer, node, op="sdp_fp16_lut_" + node.op_type.lower(),
                     inputs=node.inputs[:1], note=note,
                     encoding=ctx.new_encoding(node.outputs[0]),
                     passes=(fp16_pass({**_EW_LUT, **fields}, lut=(le, lo)),),
                     check=Fp16Check(node))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Fp16CdpLayer(Layer):
    """LRN on the CDP in FP16 over the channel axis (1)."""

    encoding: Encoding
    regs: CdpRegisters
    le: np.ndarray
    lo: np.ndarray
    check: Fp16Check

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The CDP; the LUT counters and ±65504/NaN words; the CDP threshold check."""
        r = cdp_fp16(inputs[0].codes, self.regs, self.le, self.lo, axis=1)
        y = np.asarray(r.y).view(np.uint16)
        counters = {
            "output_saturated": saturated_fp16(y),
            "nan_outputs": nan_outputs(y),
            "lut_underflow": r.PERF_LUT_UFLOW,
            "lut_overflow": r.PERF_LUT_OFLOW,
            "lut_hybrid": r.PERF_LUT_HYBRID,
            "lut_le_hit": r.PERF_LUT_LE_HIT,
            "lut_lo_hit": r.PERF_LUT_LO_HIT,
        }
        counters.update(self.check.window(y, inputs, self._window_max(inputs[0].codes)))
        return LayerOutput(QTensor(y, self.encoding), counters)

    def _window_max(self, words: np.ndarray) -> np.ndarray:
        """The largest magnitude in each output's channel window (channels outside are 0)."""
        x = np.abs(fp16_values(words).astype(np.float32))
        half = self.regs.half_window
        c = x.shape[1]
        padded = np.pad(x, [(0, 0), (half, half)] + [(0, 0)] * (x.ndim - 2))
        return np.max([padded[:, k : k + c] for k in range(2 * half + 1)], axis=0)


def lower_lrn_fp16(ctx: LoweringContext, node: Node) -> Fp16CdpLayer:
    """LRN -> the CDP in FP16 with the compiler's LE exponential table."""
    a = node.attrs
    size = int(a["size"])
    if size not in (3, 5, 7, 9):
        raise UnsupportedError(f"{node}: LRN size {size}; the CDP sums 3, 5, 7 or 9 channels")
    fields, le, lo = lrn_fp16_lut(size=size, alpha=float(a["alpha"]), beta=float(a["beta"]),
                                  k=float(a["bias"]))  # fmt: skip
    regs = CdpRegisters(INPUT_DATA_TYPE=int(Precision.FP16), NORMALZ_LEN=size // 2 - 1, **fields)
    note = "CDP: fp32 square sum, the compiler's FP16 LE table from 2^0, fp17 multiply"
    return ctx.layer(Fp16CdpLayer, node, op="cdp_fp16_lrn", inputs=node.inputs[:1], note=note,
                     encoding=ctx.new_encoding(node.outputs[0]), regs=regs, le=le, lo=lo,
                     check=Fp16Check(node))  # fmt: skip
