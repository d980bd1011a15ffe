"""Scalar twin of :mod:`.cc_fp16`: the cmod's CMAC + CACC FP16 convolution, one output at a time.

Plain Python integers, one channel at a time, in the cmod's own order (``FP16_CONV_NOTES.md``
§1): ``NvdlaMacCell::cal_fp16_booth``/``calculation_fp16`` (``cmac/NV_NVDLA_cmac.h``),
``cacc_fp16_add`` and ``cacc_fp48_to_fp32`` (``cacc/NV_NVDLA_cacc.cpp``). Slow and obvious; the
vectorised module is tested against it with ``==``.
"""

from __future__ import annotations

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
