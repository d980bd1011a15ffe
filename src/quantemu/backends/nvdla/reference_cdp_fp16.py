"""Scalar twin of :mod:`.cdp_fp16`: one output word at a time, plain Python loops.

A transcription of the cmod's ``HLS_CDP_lookup_fp16`` and ``HLS_CDP_lookup_lut``
(``cmod/hls_wrapper/cdp_hls_wrapper.cpp`` 170-684, nvdla/hw ``nvdlav1`` @ ``8e06b1b9``) on the
scalar primitives of :mod:`quantemu.intmath.reference_nvdla_float`. The cmod's host-float steps
(the ``<= 0`` test and the linear index) use NumPy float32 scalars, as C floats.
"""

from __future__ import annotations

import numpy as np

from quantemu.intmath import reference_nvdla_float as nf

FP32, FP17 = nf.FP32, nf.FP17
UFLOW, OFLOW, HIT = "uflow", "oflow", "hit"


def _as_float(w: int) -> np.float32:
    return np.array([w & 0xFFFFFFFF], np.uint32).view(np.float32)[0]


def _line(d: int, scale: int, y: int) -> int:
    """``Fp17Add(Fp17Mul(Fp32ToFp17(d), Fp16ToFp17(scale)), Fp16ToFp17(y))``."""
    prod = nf.fp_mul(nf.fp32_to_fp17(d), nf.fp16_to_fp17(scale), FP17)
    return nf.fp_add(prod, nf.fp16_to_fp17(y), FP17)


def _index(d: int, table_size: int, mode: str, k: int) -> tuple[str, int, int]:
    """``(kind, idx, frac16)`` of ``d = s - START`` (``HLS_CDP_lookup_lut``)."""
    upper = table_size - 1
    df = _as_float(d)
    if not df > 0:  # <= 0, -0 or NaN, as the C float test
        return UFLOW, 0, 0
    if mode == "exponent":
        idx = ((d >> 23) & 0xFF) - 127 - k
        if idx < 0:
            return UFLOW, 0, 0
        return (OFLOW, 0, 0) if idx >= upper else (HIT, idx, (d >> 7) & 0xFFFF)
    with np.errstate(over="ignore"):  # the C cast to float gives +Inf: an overflow
        v = np.float32(float(df) / 2.0**k) if k >= 0 else np.float32(float(df) * 2.0**-k)
    if v >= upper:
        return OFLOW, 0, 0
    idx = int(v)
    return HIT, idx, int(np.float32((v - np.float32(idx)) * np.float32(65536)))


def lookup(s: int, table: list[int], ref: tuple[int, int, int, int], mode: str, k: int):
    """One table: ``(kind, fp17 word)`` for the fp32 sum ``s``; ``ref`` = (START, END, uflow
    SCALE, oflow SCALE) words; ``mode`` "exponent" (``k`` = offset) or "linear" (select)."""
    start, end, us, os_ = ref
    d = nf.fp_sub(s, start, FP32)
    kind, idx, frac = _index(d, len(table), mode, k)
    if kind == UFLOW:
        if mode == "exponent":
            bias = 0 if k <= -127 else int(np.float32(2.0**k).view(np.uint32))
            d = nf.fp_sub(s, nf.fp_add(start, bias, FP32), FP32)
        return kind, _line(d, us, table[0])
    if kind == OFLOW:
        return kind, _line(nf.fp_sub(s, end, FP32), os_, table[-1])
    l0, l1 = table[idx], table[idx + 1]
    diff = nf.fp32_to_fp17(nf.fp_sub(nf.fp16_to_fp32(l1), nf.fp16_to_fp32(l0), FP32))
    prod = nf.fp_mul(diff, nf.fraction_to_fp17(frac, width=16), FP17)
    return kind, nf.fp_add(prod, nf.fp16_to_fp17(l0), FP17)


def _signed8(v: int) -> int:
    return (v & 0xFF) - 256 if v & 0x80 else v & 0xFF


def _choose(le: tuple[str, int], lo: tuple[str, int], regs) -> tuple[int, str]:
    """The table choice: ``(fp17 word, counter name)``."""
    (lek, ley), (lok, loy) = le, lo
    if lek == UFLOW and lok == UFLOW:
        return (loy if regs.LUT_UFLOW_PRIORITY else ley), "PERF_LUT_UFLOW"
    if lek == OFLOW and lok == OFLOW:
        return (loy if regs.LUT_OFLOW_PRIORITY else ley), "PERF_LUT_OFLOW"
    if (lek == HIT) != (lok == HIT):
        return (ley, "PERF_LUT_LE_HIT") if lek == HIT else (loy, "PERF_LUT_LO_HIT")
    return (loy if regs.LUT_HYBRID_PRIORITY else ley), "PERF_LUT_HYBRID"


def _square_sum(x32: list[int], c: int, regs) -> int:
    if regs.SQSUM_BYPASS:
        return x32[c]
    sq = [nf.fp_mul(v, v, FP32) for v in x32]
    s = nf.fp_add(nf.fp_add(sq[c - 1], sq[c + 1], FP32), sq[c], FP32)
    for k in range(2, regs.NORMALZ_LEN + 2):
        s = nf.fp_add(s, nf.fp_add(sq[c - k], sq[c + k], FP32), FP32)
    return s


def cdp_window_fp16(words: list[int], regs, le: list[int], lo: list[int]):
    """LRN of one pixel's ``C + 8`` fp16 words (4-channel halo each side): ``(y, counters)``,
    ``y`` the C output fp16 words (0..65535), counters by register name."""
    counters = dict.fromkeys(
        ("OUT_SATURATION", "PERF_LUT_UFLOW", "PERF_LUT_OFLOW", "PERF_LUT_HYBRID",
         "PERF_LUT_LE_HIT", "PERF_LUT_LO_HIT"), 0
    )  # fmt: skip
    x17 = [nf.fp16_to_fp17(w & 0xFFFF) for w in words]
    x32 = [nf.fp17_to_fp32(v) for v in x17]
    exponent = regs.LUT_LE_FUNCTION == 0
    le_mode = ("exponent", _signed8(regs.LUT_LE_INDEX_OFFSET)) if exponent else (
        "linear", _signed8(regs.LUT_LE_INDEX_SELECT))  # fmt: skip
    le_ref = (regs.LUT_LE_START_LOW, regs.LUT_LE_END_LOW, regs.LUT_LE_SLOPE_UFLOW_SCALE,
              regs.LUT_LE_SLOPE_OFLOW_SCALE)  # fmt: skip
    lo_ref = (regs.LUT_LO_START_LOW, regs.LUT_LO_END_LOW, regs.LUT_LO_SLOPE_UFLOW_SCALE,
              regs.LUT_LO_SLOPE_OFLOW_SCALE)  # fmt: skip
    y = []
    for c in range(4, len(words) - 4):
        s = _square_sum(x32, c, regs)
        le_r = lookup(s, le, le_ref, *le_mode)
        lo_r = lookup(s, lo, lo_ref, "linear", _signed8(regs.LUT_LO_INDEX_SELECT))
        r, name = _choose(le_r, lo_r, regs)
        counters[name] += 1
        if regs.MUL_BYPASS:
            _, e, m = nf.split(x32[c], FP32)
            o17 = x17[c] if nf.is_nan(e, m, FP32) else r
        else:
            o17 = nf.fp_mul(x17[c], r, FP17)
        y.append(nf.fp17_to_fp16(o17))
    return y, counters
