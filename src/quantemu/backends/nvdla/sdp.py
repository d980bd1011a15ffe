"""The SDP integer pipeline (``conformance/nvdla.md`` §2): BS -> BN -> EW(+LUT) -> converter.

Vectorised over any array shape: every stage is a handful of NumPy operations on int64 arrays of
the whole tensor. The value bounds that keep int64 exact are written beside each product.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.fp16.sdp import nan_outputs, output_fp16, run_fp16, saturated_fp16
from quantemu.backends.nvdla.lut import HIT, OFLOW, UFLOW, check_tables, sdp_lut
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
from quantemu.errors import InvalidInputError
from quantemu.intmath import saturate, wrap
from quantemu.intmath.nvdla_float import fp16_bit_patterns, int17_to_fp16_rne_sat_nvdla

OPERANDS = ("BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL", "EW_ALU", "EW_MUL")


@dataclass(frozen=True)
class SdpResult:
    """Output of :func:`sdp`: ``y`` (int16, the 16-bit output word) and the status counters.

    Counter names are the page's (§2.2); the LUT counters are 0 when the LUT is inactive.
    ``final_clamped`` is not a hardware counter: quantemu's count of the elements the final
    INT8/INT16 clamp changed (which ``OUT_SATURATION`` never counts, §2.5); it is not part of
    :meth:`counters`.
    """

    y: np.ndarray
    OUT_SATURATION: int
    LUT_UFLOW: int
    LUT_OFLOW: int
    LUT_HYBRID: int
    LUT_LE_HIT: int
    LUT_LO_HIT: int
    STATUS_UNEQUAL: int
    final_clamped: int = 0
    # FP16 runs only (processing or output in FP16): the NaN/Inf status registers.
    STATUS_NAN_INPUT_NUM: int = 0
    STATUS_INF_INPUT_NUM: int = 0
    STATUS_NAN_OUTPUT_NUM: int = 0
    fp16: bool = False

    def counters(self) -> dict[str, int]:
        """The counters by register name (with the NaN/Inf ones for an FP16 run)."""
        names = ("OUT_SATURATION", "LUT_UFLOW", "LUT_OFLOW", "LUT_HYBRID")
        names += ("LUT_LE_HIT", "LUT_LO_HIT", "STATUS_UNEQUAL")
        if self.fp16:
            names += ("STATUS_NAN_INPUT_NUM", "STATUS_INF_INPUT_NUM", "STATUS_NAN_OUTPUT_NUM")
        return {n: getattr(self, n) for n in names}


def _checked(a, name: str, bits: int, shape=None) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(f"sdp: {name} must be an integer array, got dtype {arr.dtype}")
    if shape is not None and arr.shape != shape:
        try:
            fits = np.broadcast_shapes(arr.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise InvalidInputError(
                f"sdp: {name} has shape {arr.shape}; X has shape {shape} (an operand must have "
                "X's shape or broadcast to it)"
            )
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
    LUT is active. Returns the int16 output word and the counters.
    """
    operands = dict(operands or {})
    unknown = sorted(set(operands) - set(OPERANDS))
    if unknown:
        raise InvalidInputError(
            f"sdp: unknown operand(s) {', '.join(unknown)}; known: {', '.join(OPERANDS)}"
        )
    if regs.proc_precision is Precision.FP16:
        return _sdp_fp16(x, regs, operands, (lut_le, lut_lo))
    xa = _checked(x, "X", 32)
    zeros = np.zeros((), dtype=np.int64)  # broadcasts like a per-element zero operand
    mem = {
        n: _checked(operands[n], n, 16, xa.shape) if operands.get(n) is not None else zeros
        for n in OPERANDS
    }
    v = x_unit(xa, regs.x_unit("BS"), mem["BS_ALU"], mem["BS_MUL"])
    v = x_unit(v, regs.x_unit("BN"), mem["BN_ALU"], mem["BN_MUL"])
    counts = dict.fromkeys(("LUT_UFLOW", "LUT_OFLOW", "LUT_HYBRID", "LUT_LE_HIT", "LUT_LO_HIT"), 0)
    if not regs.EW_BYPASS:
        yu = regs.y_unit()
        v = y_unit(v, yu, mem["EW_ALU"], mem["EW_MUL"])
        if not yu.lut_bypass:
            le, lo = check_tables(lut_le, lut_lo, "sdp")
            out = sdp_lut(v, le, lo, regs.lut())
            v = out.y
            counts = {
                "LUT_UFLOW": int(np.count_nonzero(out.kind == UFLOW)),
                "LUT_OFLOW": int(np.count_nonzero(out.kind == OFLOW)),
                "LUT_HYBRID": int(np.count_nonzero(out.kind == HIT)),
                "LUT_LE_HIT": int(np.count_nonzero(out.le_kind == HIT)),
                "LUT_LO_HIT": int(np.count_nonzero(out.lo_kind == HIT)),
            }
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


def _fp16_words(a, name: str, shape=None) -> np.ndarray:
    """fp16 data as uint16 bit patterns (:func:`fp16_bit_patterns`), shape checked."""
    words = fp16_bit_patterns(a, f"sdp: {name} in FP16 mode")
    if shape is not None:
        _checked(np.zeros(words.shape, np.int8), name, 8, shape)  # the shape check only
    return words.astype(np.uint16)


def _fp16_input(x) -> np.ndarray:
    """X in FP16 mode: fp16 words from memory (float16: uint16 patterns) or fp32 words from
    CACC (float32: uint32 patterns)."""
    arr = np.asarray(x)
    if arr.dtype == np.float32:
        return arr.view(np.uint32)
    if arr.dtype in (np.float16, np.uint16):
        return arr.view(np.uint16)
    if arr.dtype == np.uint32:
        return arr
    raise InvalidInputError(
        f"sdp: X must be float16 (fp16 words from memory) or float32 (fp32 words from CACC) "
        f"when PROC_PRECISION = FP16, got {arr.dtype}"
    )


def _sdp_fp16(x, regs: SdpRegisters, operands: Mapping, lut: tuple) -> SdpResult:
    """The FP16 pipeline (:mod:`.fp16.sdp`)."""
    xa = _fp16_input(x)
    zeros = np.zeros((), dtype=np.uint16)
    mem = {
        n: _fp16_words(operands[n], n, xa.shape) if operands.get(n) is not None else zeros
        for n in OPERANDS
    }
    tables = (None, None)
    if regs.lut_active:
        words = [None if t is None else _fp16_words(t, "LUT table").view(np.int16) for t in lut]
        tables = check_tables(*words, "sdp")
    v, counts = run_fp16(xa, regs, mem, tables)
    y = output_fp16(v, regs)
    unequal = 0
    if regs.compare_mode:
        y = wrap(v, 16).astype(np.int16)
        unequal = int(np.any(y != 0))
    fp16_out = regs.out_precision is Precision.FP16
    return SdpResult(
        y=np.asarray(y, dtype=np.int16),
        OUT_SATURATION=saturated_fp16(y) if fp16_out else 0,
        STATUS_UNEQUAL=unequal,
        STATUS_NAN_INPUT_NUM=counts.nan_input,
        STATUS_INF_INPUT_NUM=counts.inf_input,
        STATUS_NAN_OUTPUT_NUM=nan_outputs(y) if fp16_out else 0,
        fp16=True,
        **counts.lut,
    )
