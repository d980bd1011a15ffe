"""Scalar twins of the FP16 ops: one output at a time, plain Python integers and loops.

Slow and obvious, in the cmod's own order (nvdla/hw ``nvdlav1`` @ ``8e06b1b9``); the vectorised
modules are tested against them with ``==``:

- **CC** (:mod:`.cc`, :mod:`.cmac`): ``NvdlaMacCell::cal_fp16_booth``/``calculation_fp16``
  (``cmac/NV_NVDLA_cmac.h``), ``cacc_fp16_add`` and ``cacc_fp48_to_fp32``
  (``cacc/NV_NVDLA_cacc.cpp``), one channel at a time (``CONV_NOTES.md`` §1);
- **CDP** (:mod:`.cdp`): ``HLS_CDP_lookup_fp16`` and ``HLS_CDP_lookup_lut``
  (``cmod/hls_wrapper/cdp_hls_wrapper.cpp`` 170-684); the cmod's host-float steps (the ``<= 0``
  test and the linear index) use NumPy float32 scalars, as C floats;
- **PDP** (:mod:`.pdp`): ``NV_NVDLA_pdp.cpp``'s ``LineOperation`` (1425-1517) for the width,
  ``PoolingStage0Calc`` (1523-1636) for the height and ``PoolingStage1Calc`` (1640-1748) for the
  output, with the HLS cores of ``hls_wrapper/pdp_hls_wrapper.cpp``.

The float steps are the scalar primitives of :mod:`quantemu.intmath.reference_nvdla_float`.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.fp16.pdp import KERNEL_WIDTH_FP17, check_supported, fp16_words
from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod
from quantemu.intmath import reference_nvdla_float as nf

__all__ = [
    "booth",
    "cacc_add",
    "cdp_window_fp16",
    "cmac_cell",
    "conv_output",
    "fp48_to_fp32",
    "lookup",
    "pdp_fp16_reference",
]

# --- CC: CMAC and CACC ---------------------------------------------------------------------------

M32 = 0xFFFFFFFF
M40 = (1 << 40) - 1
#: sign_comp of cal_fp16_booth by shift
SIGN_COMP = {0: 0xAAAB0000, 4: 0xFAAAB000, 8: 0xFFAAAB00, 12: 0xFFFAAAB0, 16: 0xFFFFAAAB}
SIGN_COMP |= {20: 0xFFFFFAAB, 24: 0xFFFFFFAB, 28: 0xFFFFFFFB}


def sx(v: int, bits: int) -> int:
    """The low ``bits`` bits of ``v`` as a signed number."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _partial(code: int, dm: int) -> tuple[int, int]:
    if code in (0, 7):
        return 0x10000, 0
    if code in (1, 2):
        return dm | 0x10000, 0
    if code == 3:
        return (dm << 1) | 0x10000, 0
    if code == 4:
        return ~(dm << 1) & 0xFFFF, 1
    return ~dm & 0xFFFF, 1


def booth(res_sign: int, wt_mts: int, dat_mts: int, sft: int) -> int:
    """``cal_fp16_booth``: Booth partial products, carry-save tree, per-vector truncation."""
    if sft >= 32:
        return 0
    wt = wt_mts << 1
    pi = [_partial(((wt >> (2 * i)) & 7) ^ (7 if res_sign else 0), dat_mts) for i in range(8)]
    pp, inv = [p for p, _ in pi], [v for _, v in pi]
    c = [pp[0], pp[1] << 2 | inv[0], pp[2] << 4 | inv[1] << 2, pp[3] << 6 | inv[2] << 4]
    c += [inv[3] << 6, pp[4] << 8, pp[5] << 10 | inv[4] << 8, pp[6] << 12 | inv[5] << 10]
    c += [pp[7] << 14 | inv[6] << 12, inv[7] << 14]
    c = [v & M32 for v in c]
    for n, st, moves in ((5, 0, False), (5, 5, False), (4, 0, True)):
        cur = n
        if moves:
            c[2], c[3] = c[5], c[6]
        while cur >= 3:
            g = cur // 3
            for j in range(g):
                a, b, d = c[st + j * 3 : st + j * 3 + 3]
                c[st + j * 2], c[st + j * 2 + 1] = a ^ b ^ d, ((a & b | b & d | a & d) << 1) & M32
            for j in range(g * 3, cur):
                c[st + j - g] = c[st + j]
            cur -= g
    return sx((c[0] >> sft) + (c[1] >> sft) + SIGN_COMP[sft], 32)


def _nan44(word: int) -> int:
    return (0x3F << 38) | ((word >> 15) << 37) | ((word & 0x3FF) << 27)


def _is_nan(word: int) -> bool:
    return (word >> 10) & 31 == 31 and word & 0x3FF != 0


def cmac_cell(dat: list[int], wt: list[int]) -> int:
    """One atomic op of one MAC cell: 64 fp16 data and weight words -> the 44-bit word."""
    for words in (wt, dat):  # weights first, lowest channel first; masks ignored
        for v in words:
            if _is_nan(v):
                return _nan44(v)
    parts = []
    for d, w in zip(dat, wt, strict=True):
        if d & 0x7FFF == 0 or w & 0x7FFF == 0:
            continue
        ed, ew = (d >> 10) & 31, (w >> 10) & 31
        dm = ((d & 0x3FF) | (ed != 0) << 10) << (1 if ed == 0 else ed & 3)
        wm = ((w & 0x3FF) | (ew != 0) << 10) << (1 if ew == 0 else ew & 3)
        parts.append(((ed >> 2) + (ew >> 2), (d ^ w) >> 15, wm, dm))
    top = max((p[0] for p in parts), default=0)
    total = sum(booth(s, wm, dm, (top - co) * 4) for co, s, wm, dm in parts)
    return ((top * 4) & 63) << 38 | (total & ((1 << 38) - 1))


def _lead(v: int, top: int) -> int:
    """Highest bit position below ``top`` that differs from bit ``top`` (-1 if none)."""
    i = top - 1
    while i >= 0 and (v >> i) & 1 == (v >> top) & 1:
        i -= 1
    return i


def _align(e_mac: int, e_acc: int, m: int, a: int) -> tuple[int, int, int, int]:
    """Shift the smaller operand right (no sticky past 40 bits): (exp, mac, accu, out bits)."""
    if e_mac == e_acc:
        return e_mac, m, a, 0
    d = abs(e_mac - e_acc)
    small = a if e_mac > e_acc else m
    sob = ((small & ((1 << d) - 1)) << (40 - d)) & M40 if d <= 40 else 0
    small = small >> d if d <= 40 else 0
    return (e_mac, m, small, sob) if e_mac > e_acc else (e_acc, small, a, sob)


def _sum_round(a: int, m: int, sob: int, big: int) -> tuple[int, int]:
    raw = a + m
    tmp = sx(raw, 40)
    if (m < 0) == (a < 0) and (m < 0) != (tmp < 0):  # overflow: shift right by one
        summ, e, neg = raw >> 1, big + 1, raw < 0
        need = (raw & 1 and sob != 0) if neg else raw & 1
    else:
        k = 38 - _lead(tmp & M40, 39) if (tmp >> 38) & 1 == (tmp >> 39) & 1 else 0
        if k:  # normalise left, shifting the shifted-out bits back in
            tmp, sob = sx((tmp << k) | (sob >> (40 - k)), 40), (sob << k) & M40
        summ, e, neg = tmp, big - k, tmp < 0
        guard, sticky = (sob >> 39) & 1, sob & ((1 << 39) - 1) != 0
        need = (guard and sticky) if neg else guard
    r = sx(summ + (1 if need else 0), 40)
    if (r < 0) != neg:
        r, e = sx((int(neg) << 39) | ((r & M40) >> 1), 40), e + 1
    return r, e


def cacc_add(accu: int, mac: int) -> int:
    """``cacc_fp16_add``: 48-bit accumulator word + 44-bit CMAC word -> 48-bit word."""
    mexp, mm = (mac >> 38) & 63, sx(mac, 38)
    aexp, am = (accu >> 40) & 255, sx(accu, 40)
    if mm == 0:
        return accu
    if aexp == 255:
        return (255 << 40) | (((accu >> 29) & 0x7FF) << 29)
    if mexp == 63:
        return (255 << 40) | (((mac >> 27) & 0x7FF) << 29)
    n = 36 - _lead(mm & ((1 << 38) - 1), 37)
    e_mac = (mexp - n + 49) & 255
    big, m, a, sob = _align(e_mac, 0 if am == 0 else aexp, sx(mm << n, 38) * 4, am)
    fin, e = _sum_round(a, m, sob, big)
    return ((0 if fin == 0 else e) & 255) << 40 | (fin & M40)


def fp48_to_fp32(accu: int) -> int:
    """``cacc_fp48_to_fp32``: the fp32 word CACC sends to the SDP."""
    e, m = (accu >> 40) & 255, sx(accu, 40)
    if e == 255:
        return ((accu >> 39) & 1) << 31 | 0x7F800000 | ((accu >> 29) & 0x3FF)
    sign = int(m < 0)
    if m == -(1 << 39):
        return 1 << 31 | ((e + 65) & 255) << 23
    mag, e32 = abs(m), 0 if m == 0 else (e + 64) & 255
    t = (mag >> 15) + ((mag >> 14) & 1)  # guard bit only: half away from zero
    if t >> 24:
        t, e32 = t >> 1, (e32 + 1) & 255
    return sign << 31 | e32 << 23 | (t & 0x7FFFFF)


def conv_output(x, w, out: tuple[int, int, int], geometry: dict) -> int:
    """The fp32 word of output ``out = (k, oy, ox)``: ``x`` ``[C][H][W]`` and ``w`` ``[K][C][R][S]``
    nested lists of fp16 words; ``geometry``: stride, dilation ``(y, x)``, padding ``(left, top,
    right, bottom)``, pad_value."""
    k, oy, ox = out
    (sy, sx_), (dy, dx) = geometry["stride"], geometry["dilation"]
    pl, pt = geometry["padding"][:2]
    c, h, wd = len(x), len(x[0]), len(x[0][0])
    r, s = len(w[0][0]), len(w[0][0][0])
    acc = None
    for c0 in range(0, c, 64):
        for i in range(r):
            for j in range(s):
                iy, ix = oy * sy + i * dy - pt, ox * sx_ + j * dx - pl
                inside = 0 <= iy < h and 0 <= ix < wd
                chans = range(c0, c0 + 64)
                dat = [
                    (x[ch][iy][ix] if inside else geometry["pad_value"]) if ch < c else 0
                    for ch in chans
                ]
                wt = [w[k][ch][i][j] if ch < c else 0 for ch in chans]
                acc = cacc_add(0 if acc is None else acc, cmac_cell(dat, wt))
    return fp48_to_fp32(acc)


# --- CDP ------------------------------------------------------------------------------------------

FP32, FP17 = nf.FP32, nf.FP17
UFLOW, OFLOW, HIT = "uflow", "oflow", "hit"


def _as_float(w: int) -> np.float32:
    return np.array([w & 0xFFFFFFFF], np.uint32).view(np.float32)[0]


def _slope_line(d: int, scale: int, y: int) -> int:
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
        return kind, _slope_line(d, us, table[0])
    if kind == OFLOW:
        return kind, _slope_line(nf.fp_sub(s, end, FP32), os_, table[-1])
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


# --- PDP ------------------------------------------------------------------------------------------


def _f16_cmp(a: int, b: int, method: PoolingMethod) -> int:
    return nf.fp_cmp(a, b, nf.FP16, maximum=method is PoolingMethod.MAX)


def _add17(a: int, b: int) -> int:
    return nf.fp_add(a, b, nf.FP17)


def _mul17(a: int, b: int) -> int:
    return nf.fp_mul(a, b, nf.FP17)


def _line_operation(row: list[int], ow: int, regs: PdpRegisters) -> int:
    """LineOperation over the window's real columns of one input row (``HLS_..._FP16_W``)."""
    g, pad = regs.geometry(), regs.pad_values_fp17()
    kw, W, pl = g.kernel_width, g.width, g.pad_left
    start = ow * g.stride_width - pl
    acc = 0
    for w in range(max(0, start), min(W - 1, start + kw - 1) + 1):
        k = pl + w - ow * g.stride_width  # kernel_width_iter
        first = w == 0 or k == 0
        add_left = (w + 1 < kw) and ((k + 1 == kw) or ((w + 1 == W) and (w < k) and pl != 0))
        add_right = (not add_left) and (w + kw - k > W) and (w + 1 == W)
        pad_left = pad[kw - (w + 1) - 1] if add_left else 0
        pad_right = pad[kw - (k + 1) - 1] if add_right else 0
        if regs.method is PoolingMethod.AVERAGE:
            x17 = nf.fp16_to_fp17(row[w])
            v = x17 if first else _add17(acc, x17)
            acc = _add17(_add17(v, pad_left), pad_right)
        else:
            acc = row[w] if first else _f16_cmp(acc, row[w], regs.method)
    return acc


def _output(x: list[list[int]], oh: int, ow: int, regs: PdpRegisters) -> int:
    """PoolingStage0Calc over the window's real rows (``HLS_..._FP16_H``), then Stage1."""
    g, pad = regs.geometry(), regs.pad_values_fp17()
    kh, H, pt = g.kernel_height, g.height, g.pad_top
    kw17 = KERNEL_WIDTH_FP17[g.kernel_width]
    start = oh * g.stride_height - pt
    acc = 0
    for h in range(max(0, start), min(H - 1, start + kh - 1) + 1):
        kk = pt + h - oh * g.stride_height  # kernel_height_iter
        row = _line_operation(x[h], ow, regs)
        first = h == 0 or kk == 0
        add_top = (h + 1 < kh) and ((kk + 1 == kh) or ((h + 1 == H) and (h < kk)))
        add_bottom = (not add_top) and (h + kh - kk > H) and (h + 1 == H)
        pad_top = _mul17(pad[kh - (h + 1) - 1] if add_top else 0, kw17)
        pad_bottom = _mul17(pad[kh - (kk + 1) - 1] if add_bottom else 0, kw17)
        if regs.method is PoolingMethod.AVERAGE:
            v = row if first else _add17(row, acc)
            acc = _add17(_add17(v, pad_top), pad_bottom)
        else:
            acc = row if first else _f16_cmp(row, acc, regs.method)
    if regs.method is not PoolingMethod.AVERAGE:
        return acc
    acc = _mul17(_mul17(acc, regs.RECIP_KERNEL_WIDTH), regs.RECIP_KERNEL_HEIGHT)
    return nf.fp17_to_fp16(acc)


def pdp_fp16_reference(x, regs: PdpRegisters) -> np.ndarray:
    """Same contract as :func:`~quantemu.backends.nvdla.fp16.pdp.pdp_fp16`, output by output."""
    check_supported(regs)
    words = fp16_words(x, regs)
    g = regs.geometry()
    flush = regs.FLYING_MODE == 1 and regs.NAN_TO_ZERO == 1
    out = np.zeros((*words.shape[:-2], g.out_height, g.out_width), dtype=np.uint16)
    for lead in np.ndindex(*words.shape[:-2]):  # (n,) c
        cube = [[int(v) for v in line] for line in words[lead]]
        if flush:
            cube = [[0 if v & 0x7C00 == 0x7C00 and v & 0x3FF else v for v in r] for r in cube]
        for oh in range(g.out_height):
            for ow in range(g.out_width):
                out[(*lead, oh, ow)] = _output(cube, oh, ow, regs)
    return out.view(np.int16)
