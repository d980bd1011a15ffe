"""The CDP (LRN) in FP16, as NVIDIA's C model computes it (``HLS_CDP_lookup_fp16``).

Every step is the cmod's own arithmetic (:mod:`quantemu.intmath.nvdla_float`), not IEEE 754;
nvdla/hw ``nvdlav1`` @ ``8e06b1b9``, ``cmod/hls_wrapper/cdp_hls_wrapper.cpp`` 170-684:

1. Input: ``x17 = Fp16ToFp17(x)``, ``x32 = Fp17ToFp32(x17)``. DATIN_OFFSET/SCALE/SHIFTER are
   ignored.
2. Squares ``FpMul(x32, x32)`` (exact) and their sum in fp32, in the cmod's fixed order:
   ``(sq[c-1] + sq[c+1]) + sq[c]``, then ``+ (sq[c-k] + sq[c+k])`` for k = 2 .. NORMALZ_LEN + 1.
   ``SQSUM_BYPASS`` gives ``x32[c]``.
3. LUT, per table (LE: 65 entries, exponent or linear; LO: 257, linear): ``d = FpSub(s, START)``
   with START/END the ``_LOW`` words read as fp32 (``_HIGH`` is ignored). ``d`` not > 0 (as a C
   float: zero, negative, NaN) is an underflow. Exponent: ``idx = expfield(d) - 127 - OFFSET``
   (an int32), fraction = mantissa bits 22..7. Linear, in C float arithmetic:
   ``v = float(double(d) / 2^SELECT)``, overflow when ``v >= depth - 1``, ``idx = int(v)``,
   fraction = the 16 bits of ``v - idx``, truncated. A hit is
   ``L0 + Fp32ToFp17(FpSub(L1, L0)) · FpFractionToFloat<16,6,10>(frac)`` in fp17; under/overflow
   ``Fp32ToFp17(s - REF) · SCALE + L[0 or depth-1]`` in fp17 (REF = START, plus ``2^OFFSET`` in
   LE exponent mode unless OFFSET <= -127; END for overflow). SCALEs are fp16 words; the slope
   shifts are ignored.
4. The table choice and the five LUT counters are the INT pipeline's (``nvdla.md`` §3.3).
5. ``Fp17Mul(x17[c], r)`` (data first); with ``MUL_BYPASS`` the LUT result, except that a NaN
   input passes through. Output ``Fp17ToFp16``; DATOUT_* are ignored and OUT_SATURATION is 0.

Channels outside the cube are +0 in FP16 (the cmod forces ``cdp_datin_offset`` to 0).
:mod:`.reference` is the scalar twin this module is tested against with ``==``.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.halo import HALO, halo_outputs, with_halo
from quantemu.backends.nvdla.lut import HIT, LE_DEPTH, LO_DEPTH, OFLOW, UFLOW, cdp_counts, select_lo
from quantemu.backends.nvdla.registers import CdpRegisters, LeFunction
from quantemu.backends.nvdla.results import CdpResult
from quantemu.errors import InvalidInputError
from quantemu.intmath.nvdla_float import (
    fp16_bit_patterns,
    fp16_to_fp17_nvdla,
    fp16_to_fp32_nvdla,
    fp17_add_rne_nvdla,
    fp17_mul_rne_nvdla,
    fp17_to_fp16_rne_sat_nvdla,
    fp17_to_fp32_nvdla,
    fp32_add_rne_nvdla,
    fp32_mul_rne_nvdla,
    fp32_sub_rne_nvdla,
    fp32_to_fp17_rne_sat_nvdla,
    fraction_to_fp17_nvdla,
)

_I = np.int64
CDP_FRAC_BITS = 16  # the CDP LUT's fraction width (FpFractionToFloat<16,6,10>)


def fp16_words(a, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """fp16 data as int64 bit patterns 0..65535 (:func:`fp16_bit_patterns`), shape checked."""
    words = fp16_bit_patterns(a, f"cdp: {name} (FP16 mode)")
    if shape is not None and words.shape != shape:
        raise InvalidInputError(f"cdp: {name} must have shape {shape}, got {words.shape}")
    return words


def _f32(w: np.ndarray) -> np.ndarray:
    """fp32 words as C floats (NumPy float32), for the cmod's host-float comparisons."""
    return np.asarray(w, dtype=_I).astype(np.uint32).view(np.float32)


def _linear_index(d: np.ndarray, bad: np.ndarray, select: int, depth: int):
    """``(oflow, idx, frac16)`` of the C-float linear index (module docstring, step 3)."""
    scale = 2.0**-select  # exact in double for |select| <= 128
    with np.errstate(over="ignore"):  # the C cast to float gives +Inf: an overflow below
        v = (np.where(bad, 0.0, _f32(d)).astype(np.float64) * scale).astype(np.float32)
    oflow = ~bad & (v >= np.float32(depth - 1))
    v = np.where(oflow, np.float32(0), v)
    whole = np.floor(v)  # v >= 0 here, so floor is the C cast's truncation
    frac = np.floor((v - whole) * np.float32(65536))  # float32 ops, exact
    return oflow, whole.astype(_I), frac.astype(_I)


def _flow(d: np.ndarray, scale: int, y: int) -> np.ndarray:
    """``Fp17Add(Fp17Mul(Fp32ToFp17(d), Fp16ToFp17(scale)), Fp16ToFp17(y))``."""
    prod = fp17_mul_rne_nvdla(fp32_to_fp17_rne_sat_nvdla(d), fp16_to_fp17_nvdla(np.uint16(scale)))
    return fp17_add_rne_nvdla(prod, fp16_to_fp17_nvdla(np.uint16(y))).astype(_I)


def table_lookup(s, table: np.ndarray, ref: tuple[int, int, int, int], index: tuple):
    """One table on fp32 sums ``s``: ``(kind, fp17 result)``.

    ``ref`` is (START word, END word, uflow SCALE, oflow SCALE); ``index`` is
    ``("exponent", offset)`` or ``("linear", select)``.
    """
    start, end, us, os_ = ref
    depth = table.size
    d = fp32_sub_rne_nvdla(s, start).astype(_I)
    under = ~(_f32(d) > 0)
    mode, k = index
    if mode == "exponent":
        idx = ((d >> 23) & 0xFF) - 127 - k
        frac = (d >> 7) & 0xFFFF
        under |= idx < 0
        over = ~under & (idx >= depth - 1)
        bias = 0 if k <= -127 else int(np.float32(2.0**k).view(np.uint32))
        d_under = fp32_sub_rne_nvdla(s, fp32_add_rne_nvdla(start, bias)).astype(_I)
    else:
        over, idx, frac = _linear_index(d, under, k, depth)
        d_under = d
    hit = ~under & ~over
    idx = np.where(hit, idx, 0)
    l0, l1 = table[idx], table[idx + 1]
    diff = fp32_sub_rne_nvdla(fp16_to_fp32_nvdla(l1), fp16_to_fp32_nvdla(l0))
    weight = fraction_to_fp17_nvdla(np.where(hit, frac, 0), width=CDP_FRAC_BITS)
    y_hit = fp17_add_rne_nvdla(
        fp17_mul_rne_nvdla(fp32_to_fp17_rne_sat_nvdla(diff), weight), fp16_to_fp17_nvdla(l0)
    ).astype(_I)
    y_under = _flow(d_under, us, int(table[0]))
    y_over = _flow(fp32_sub_rne_nvdla(s, end).astype(_I), os_, int(table[-1]))
    kind = np.select([under, over], [UFLOW, OFLOW], HIT)
    return kind, np.select([under, over], [y_under, y_over], y_hit)


def lut_fp16(s: np.ndarray, regs: CdpRegisters, le: np.ndarray, lo: np.ndarray):
    """Both tables and the choice between them: ``(fp17 result, le_kind, lo_kind)``."""
    w = {n: getattr(regs, f"LUT_{n}_LOW") for n in ("LE_START", "LE_END", "LO_START", "LO_END")}
    if regs.LUT_LE_FUNCTION == LeFunction.EXPONENT:
        le_index = ("exponent", regs.signed("LUT_LE_INDEX_OFFSET"))
    else:
        le_index = ("linear", regs.signed("LUT_LE_INDEX_SELECT"))
    le_ref = (w["LE_START"], w["LE_END"], regs.LUT_LE_SLOPE_UFLOW_SCALE,
              regs.LUT_LE_SLOPE_OFLOW_SCALE)  # fmt: skip
    lo_ref = (w["LO_START"], w["LO_END"], regs.LUT_LO_SLOPE_UFLOW_SCALE,
              regs.LUT_LO_SLOPE_OFLOW_SCALE)  # fmt: skip
    le_kind, le_y = table_lookup(s, le, le_ref, le_index)
    lo_kind, lo_y = table_lookup(s, lo, lo_ref, ("linear", regs.signed("LUT_LO_INDEX_SELECT")))
    # the INT pipeline's rule (only the priority fields of the decoded registers are read)
    take_lo = select_lo(le_kind, lo_kind, regs.lut())
    return np.where(take_lo, lo_y, le_y), le_kind, lo_kind


def square_sum(x32: np.ndarray, regs: CdpRegisters, n_out: int) -> np.ndarray:
    """The fp32 window sums of output channels ``HALO .. HALO + n_out`` (step 2)."""

    def at(k: int) -> np.ndarray:
        return sq[..., HALO + k : HALO + k + n_out]

    if regs.SQSUM_BYPASS:
        return x32[..., HALO : HALO + n_out]
    sq = fp32_mul_rne_nvdla(x32, x32).astype(_I)
    s = fp32_add_rne_nvdla(fp32_add_rne_nvdla(at(-1), at(1)), at(0))
    for k in range(2, regs.half_window + 1):  # at most 3 window steps, each vectorised
        s = fp32_add_rne_nvdla(s, fp32_add_rne_nvdla(at(-k), at(k)))
    return s.astype(_I)


def cdp_window_fp16(x, regs: CdpRegisters, lut_le, lut_lo, *, axis: int = -1) -> CdpResult:
    """:func:`~quantemu.backends.nvdla.cdp.cdp_window` for ``INPUT_DATA_TYPE = FP16``.

    ``x`` holds fp16 values (float16, or raw int16/uint16 words) with ``C + 8`` channels along
    ``axis``; the tables are 65 and 257 fp16 values. ``y`` holds the output fp16 words as int16.
    """
    xa = np.moveaxis(fp16_words(x, "X"), axis, -1)
    n_out = halo_outputs(xa, axis, np.shape(x))
    le = fp16_words(lut_le, "LUT_LE", (LE_DEPTH,))
    lo = fp16_words(lut_lo, "LUT_LO", (LO_DEPTH,))
    x17 = fp16_to_fp17_nvdla(xa).astype(_I)
    x32 = fp17_to_fp32_nvdla(x17).astype(_I)
    r, le_kind, lo_kind = lut_fp16(square_sum(x32, regs, n_out), regs, le, lo)
    c17, c32 = x17[..., HALO : HALO + n_out], x32[..., HALO : HALO + n_out]
    if regs.MUL_BYPASS:
        nan = ((c32 >> 23) & 0xFF == 0xFF) & ((c32 & 0x7FFFFF) != 0)
        o17 = np.where(nan, c17, r)
    else:
        o17 = fp17_mul_rne_nvdla(c17, r)
    y = fp17_to_fp16_rne_sat_nvdla(o17).view(np.int16)
    return CdpResult(y=np.moveaxis(y, -1, axis), OUT_SATURATION=0, **cdp_counts(le_kind, lo_kind))


def cdp_fp16(x, regs: CdpRegisters, lut_le, lut_lo, *, axis: int = 0) -> CdpResult:
    """LRN of a cube in FP16 (channels along ``axis``); channels beyond the edges are +0."""
    xa = np.moveaxis(fp16_words(x, "X"), axis, -1).astype(np.uint16)
    r = cdp_window_fp16(with_halo(xa, 0), regs, lut_le, lut_lo)
    return CdpResult(np.moveaxis(r.y, -1, axis), **r.counters())
