"""The SDP integer pipeline (``conformance/nvdla.md`` §2): BS -> BN -> EW(+LUT) -> converter.

Vectorised over any array shape: every stage is a handful of NumPy operations on int64 arrays of
the whole tensor. The value bounds that keep int64 exact are written beside each product.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from quantemu.backends.nvdla.fp16.sdp import nan_outputs, saturated_fp16, sdp_fp16
from quantemu.backends.nvdla.lut import SDP_COUNTERS, check_tables, sdp_counts, sdp_lut
from quantemu.backends.nvdla.operands import check_shape, known_operands, memory_operands
from quantemu.backends.nvdla.precision import converter, shifter, shr
from quantemu.backends.nvdla.registers import (
    AluAlgo,
    EwConverter,
    OperandSource,
    Precision,
    SdpRegisters,
    XUnit,
    YUnit,
)
from quantemu.backends.nvdla.results import SdpResult
from quantemu.errors import InvalidInputError
from quantemu.intmath import saturate, wrap
from quantemu.intmath.nvdla_float import int17_to_fp16_rne_sat_nvdla


def _checked(a, name: str, bits: int, shape=None) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(f"sdp: {name} must be an integer array, got dtype {arr.dtype}")
    if shape is not None:
        check_shape(arr.shape, name, shape)
    arr = arr.astype(np.int64, copy=False)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise InvalidInputError(
            f"sdp: {name} values must fit int{bits} [{lo}, {hi}], got [{arr.min()}, {arr.max()}]"
        )
    return arr


def x_unit(x: np.ndarray, u: XUnit, alu_mem: np.ndarray, mul_mem: np.ndarray) -> np.ndarray:
    """One X unit (BS or BN), §2.3, on int64 arrays of int32 values; returns int32 values."""
    if u.bypass:
        return x
    a = x
    if not u.alu_bypass:
        op = alu_mem if u.alu_src is OperandSource.MEMORY else np.int64(u.alu_operand)
        op, _ = shifter(op, shift=u.alu_shift, bits=32)  # int16 << 0..63, saturated to int32
        if u.alu_algo is AluAlgo.MAX:
            a = np.maximum(x, op)
        elif u.alu_algo is AluAlgo.MIN:
            a = np.minimum(x, op)
        else:
            a = x + op  # SUM (and ALGO 3): exact 33-bit sum, not saturated here
    m = a
    if not u.mul_bypass:
        k = mul_mem if u.mul_src is OperandSource.MEMORY else np.int64(u.mul_operand)
        m = a * k  # |a| <= 2^32, |k| <= 2^15: |a * k| <= 2^47
    # The truncate runs even with MUL bypassed; the PReLU pass-through instead WRAPS (quirk).
    t = shr(m, u.mul_shift, 32)
    if not u.mul_bypass and u.mul_prelu:
        t = np.where(a >= 0, wrap(a, 32), t)  # PReLU: non-negative values pass
    if not u.relu_bypass:
        t = np.maximum(t, 0)
    return t


def _ew_operand(src: OperandSource, reg: int, mem: np.ndarray, cvt: EwConverter) -> np.ndarray:
    if src is OperandSource.REGISTER:
        return np.int64(reg)
    if cvt.bypass:
        return mem
    # (int16 - int32) * int16: |.| <= 2^33 * 2^15 = 2^48
    y, _ = converter(mem, offset=cvt.offset, scale=cvt.scale, shift=cvt.truncate, bits=32)
    return y


def y_unit(x: np.ndarray, u: YUnit, alu_mem: np.ndarray, mul_mem: np.ndarray) -> np.ndarray:
    """The EW (Y) unit without its LUT, §2.4: MUL first, then ALU; int32 values out."""
    m = x
    if not u.mul_bypass:
        k = _ew_operand(u.mul_src, u.mul_operand, mul_mem, u.mul_cvt)
        prod = x * k  # int32 * int32: |.| <= 2^62
        scaled = shr(prod, u.truncate, 32)  # shift 0..1023: exact at any size (intmath)
        m = np.where(x >= 0, x, scaled) if u.mul_prelu else scaled
    if u.alu_bypass:
        return m
    k = _ew_operand(u.alu_src, u.alu_operand, alu_mem, u.alu_cvt)
    if u.alu_algo is AluAlgo.MAX:
        r = np.maximum(m, k)
    elif u.alu_algo is AluAlgo.MIN:
        r = np.minimum(m, k)
    elif u.alu_algo is AluAlgo.SUM:
        r = m + k
    else:  # EQL (compare mode): 0 where equal, 1 otherwise
        r = (m != k).astype(np.int64)
    return saturate(r, 32)


def sdp(
    x,
    regs: SdpRegisters,
    *,
    operands: Mapping[str, np.ndarray] | None = None,
    lut_le=None,
    lut_lo=None,
) -> SdpResult:
    """Run the SDP integer pipeline (§2.6) on the int32 values ``x`` (any shape).

    ``operands`` maps ``BS_ALU``, ``BS_MUL``, ``BN_ALU``, ``BN_MUL``, ``EW_ALU``, ``EW_MUL`` to
    per-element int16 arrays of ``x``'s shape (or broadcastable to it, e.g. ``(1, C, 1, 1)``
    for a per-channel operand), used where the matching ``*_SRC = 1``; an absent one is all
    zeros. ``lut_le`` (65) and ``lut_lo`` (257) int16 tables are required when the
    LUT is active. Returns the int16 output word and the counters. ``PROC_PRECISION = FP16``
    runs :func:`.fp16.sdp.sdp_fp16` (fp16 or fp32 words X, fp16 operands and tables).
    """
    operands = known_operands(operands)
    if regs.proc_precision is Precision.FP16:
        return sdp_fp16(x, regs, operands, lut_le, lut_lo)
    xa = _checked(x, "X", 32)
    zero = np.zeros((), dtype=np.int64)  # broadcasts like a per-element zero operand
    mem = memory_operands(operands, lambda a, n: _checked(a, n, 16, xa.shape), zero)
    v = x_unit(xa, regs.x_unit("BS"), mem["BS_ALU"], mem["BS_MUL"])
    v = x_unit(v, regs.x_unit("BN"), mem["BN_ALU"], mem["BN_MUL"])
    counts = dict.fromkeys(SDP_COUNTERS, 0)
    if not regs.EW_BYPASS:
        yu = regs.y_unit()
        v = y_unit(v, yu, mem["EW_ALU"], mem["EW_MUL"])
        if not yu.lut_bypass:
            le, lo = check_tables(lut_le, lut_lo, "sdp")
            out = sdp_lut(v, le, lo, regs.lut())
            v = out.y
            counts = sdp_counts(out.kind, out.le_kind, out.lo_kind)
    return SdpResult(**_int_output(v, regs), **counts)


def _int_output(v: np.ndarray, regs: SdpRegisters) -> dict:
    """The output converter and final word of the integer pipeline (§2.5, §2.6), with FP16
    output through ``Int17ToFp16``: :class:`SdpResult`'s fields but the LUT counters."""
    c = regs.output_converter()
    # (int32 - int32) * int16: |.| <= 2^32 * 2^15 = 2^47; the 17-bit step carries the flag,
    # the final clamp to the output precision is never counted (§2.5).
    t, flag = converter(v, offset=c.offset, scale=c.scale, shift=c.shift, bits=17)
    fp16_out = regs.out_precision is Precision.FP16
    if fp16_out:  # Int17ToFp16 of the 17-bit value (the SHR flag is not the counter then)
        y = int17_to_fp16_rne_sat_nvdla(t).view(np.int16).astype(np.int64)
    else:
        y = saturate(t, 8 if regs.out_precision is Precision.INT8 else 16)
    clamped = 0 if fp16_out else int(np.count_nonzero(y != t))
    unequal = 0
    if regs.compare_mode:
        y = wrap(v, 16)
        unequal, clamped = int(np.any(y != 0)), 0
    y = np.asarray(y, dtype=np.int16)
    return {
        "y": y,
        "OUT_SATURATION": saturated_fp16(y) if fp16_out else int(np.count_nonzero(flag)),
        "STATUS_UNEQUAL": unequal,
        "final_clamped": clamped,
        "STATUS_NAN_OUTPUT_NUM": nan_outputs(y) if fp16_out else 0,
        "fp16": fp16_out,
    }
