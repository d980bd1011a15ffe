"""CMAC in FP16: the Booth products and atomic ops of NVIDIA's C model, vectorised for speed.

nvdla/hw ``nvdlav1`` @ ``8e06b1b9``, class ``NvdlaMacCell`` of ``cmac/NV_NVDLA_cmac.h``
(``CONV_NOTES.md`` §1.2; :mod:`.cc` adds CACC and the convolution loops).

**The Booth product** (``cal_fp16_booth``, 433-589). The weight mantissa ``wm`` gives eight
radix-4 digits (``code_i = ((wm << 1) >> 2i) & 7``, XOR 7 when ``res_sign`` is set, which negates
the digit); digit ``i`` contributes the 17-bit partial product ``pp_i = (dm * |d_i|) ^ (0xFFFF if
d_i < 0 else 0x10000)`` and the carry-in ``inv_i = d_i < 0``. They are laid out as ten 32-bit
vectors ``c_j`` and reduced by a fixed tree of eight 3:2 carry-save adders to two vectors ``p0``,
``p1``; the product is ``(p0 >> s) + (p1 >> s) + sign_comp(s)`` modulo 2^32, as int32.

Two facts make this fast without changing a bit:

- ``c_j = dm * M_j ^ G_j``, where ``M_j`` and ``G_j`` depend only on the weight and ``res_sign``
  (:func:`booth_constants`): the digits are decoded once per weight, not once per product.
- Each term ``pp_i + inv_i`` is ``d_i * dm + 0x10000``, so the ten vectors sum to
  ``S = P + 0x55550000`` with ``P = +-wm * dm`` (``|P| < 2^28``): ``0 < S < 2^31``. A carry-save
  adder keeps the sum of its inputs, so no vector ever reaches bit 31, nothing is lost to the
  32-bit mask, and ``p0, p1 < 2^31``. Hence ``sign_comp(s) = -(0x55550000 >> s)`` for every shift
  the cmod uses, and a shift clamped to 31 gives exactly the cmod's 0 for shifts of 32 or more.

**The atomic op** (``calculation_fp16``, 669-835): NaN first (weights, lowest channel first, then
data; masks ignored), else the exact integer sum of the products of the channels whose datum and
weight are both not +-0, each shifted by ``4 * (max - coarse)``, with ``coarse = (e_d >> 2) +
(e_w >> 2)`` and ``max`` the largest ``coarse`` (0 when no channel takes part). The result is the
44-bit word ``(4 * max & 63) << 38 | M`` (38-bit two's complement ``M``). Channels that do not
take part are skipped: only the (pixel, channel) pairs with a non-zero datum are formed, each
against all the kernels, and the per-pixel max and sum are segmented reductions.
"""

from __future__ import annotations

import itertools

import numpy as np

_I = np.int64
_U = np.uint32
_M38 = (1 << 38) - 1
BIAS = 0x55550000  # sum of the digits' sign-extension constants 0x10000 << 2i, i = 0..7
_BIAS = np.uint32(BIAS)
_MAG = np.array([0, 1, 1, 2, 2, 1, 1, 0], _U)  # |digit| by Booth code
_MUL_OF = (0, 1, 2, 3, None, 4, 5, 6, 7, None)  # the digit whose multiple c_j holds (c4, c9: none)
_ROWS = 19  # per weight: M_0..M_7, G_0..G_9, 4 * (e_w >> 2)
_COARSE = 18
_ZERO_W = -256  # 4 * coarse of a +-0 weight: every shift >= 32, and it never raises the max
_CHUNK = 1 << 14  # products per block: the ~10 working arrays stay in the L2 cache


def booth_constants(res_sign, wt_mts) -> np.ndarray:
    """``[..., 18]`` uint32: ``M_0..M_7`` then ``G_0..G_9`` with ``c_j = dm * M_{i(j)} ^ G_j``
    (``c_4 = G_4``, ``c_9 = G_9``) for the Booth digits of ``wt_mts`` (below 2^14)."""
    wt2 = np.asarray(wt_mts).astype(_U) << 1
    rev = np.where(np.asarray(res_sign) != 0, 7, 0).astype(_U)
    mul, xor, inv = [], [], []
    for i in range(8):  # the eight digits, not elements
        code = ((wt2 >> (2 * i)) & 7) ^ rev
        neg = (code >= 4) & (code <= 6)
        mul.append(_MAG[code] << (2 * i))
        xor.append(np.where(neg, 0xFFFF, 0x10000).astype(_U) << (2 * i))
        inv.append(neg.astype(_U) << (2 * i))  # carry-in of digit i, in the next vector's low bits
    g = [xor[0], xor[1] | inv[0], xor[2] | inv[1], xor[3] | inv[2], inv[3]]
    g += [xor[4], xor[5] | inv[4], xor[6] | inv[5], xor[7] | inv[6], inv[7]]
    return np.stack(np.broadcast_arrays(*mul, *g), axis=-1)


def _csa(a, b, d, t):
    """3:2 carry-save adder in place: ``b`` <- ``a ^ b ^ d``, ``a`` <- ``majority << 1`` (``t``:
    scratch). The carry is computed as ``a + b + d - sum``: the inputs are below 2^31 and sum
    below 2^31, so this equals the cmod's ``(maj << 1) & 0xffffffff`` (one operation fewer)."""
    np.bitwise_xor(a, b, out=t)
    a += b
    np.bitwise_xor(t, d, out=b)
    a += d
    a -= b
    return a, b


def _booth_tree(dm, tab, sft) -> np.ndarray:
    """Booth products, int32 ``[n, K]``: ``dm`` ``[n, K]``, ``tab`` ``[>=18, n, K]`` (constants),
    ``sft`` ``[n, K]`` uint32 shifts, already clamped to 31. The tree is cal_fp16_booth 517-548:
    ``(c0, c1, c2) + c3 + c4`` and ``(c5, c6, c7) + c8 + c9``, then the four vectors."""
    shape = sft.shape
    buf = [np.empty(shape, _U) for _ in range(6)]

    def vec(j, out):
        np.multiply(dm, tab[_MUL_OF[j]], out=out)
        return np.bitwise_xor(out, tab[8 + j], out=out)

    halves = []
    for base, (x, y, z) in ((0, buf[:3]), (5, buf[2:5])):  # half A's z is free once A is done
        a, b = _csa(vec(base, x), vec(base + 1, y), vec(base + 2, z), buf[5])
        a, b = _csa(a, b, vec(base + 3, z), buf[5])
        halves.append(_csa(a, b, tab[8 + base + 4], buf[5]))  # c4 / c9: constants
    (a, b), (carry, summ) = halves
    a, b = _csa(a, b, summ, buf[5])  # the order matters: c5 (sum) first, then c6 (carry)
    a, b = _csa(a, b, carry, buf[5])
    np.right_shift(a, sft, out=a)
    np.right_shift(b, sft, out=b)
    a += b
    a -= np.right_shift(_BIAS, sft, out=buf[5])  # sign_comp(s) = -(BIAS >> s) modulo 2^32
    return a.view(np.int32)


def booth_fp16(res_sign, wt_mts, dat_mts, sft) -> np.ndarray:
    """``NvdlaMacCell::cal_fp16_booth``: the signed product of two mantissas (below 2^14) with
    each carry-save vector shifted right by ``sft`` (a multiple of 4), as int64; 0 for ``sft >=
    32``. Exactly ``+-wt_mts * dat_mts`` for ``sft = 0``; within 1 of the floor otherwise.

    >>> int(booth_fp16(1, 3, 5, 0)), int(booth_fp16(0, 0x3FFF, 0x3FFF, 8))
    (-15, 1048448)
    """
    sft = np.asarray(sft, dtype=_I)
    shape = np.broadcast_shapes(np.shape(res_sign), np.shape(wt_mts), np.shape(dat_mts), sft.shape)
    tab = np.broadcast_to(booth_constants(res_sign, wt_mts), (*shape, 18)).reshape(-1, 18).T
    dm = np.broadcast_to(np.asarray(dat_mts).astype(_U), shape).reshape(1, -1)
    s = np.broadcast_to(np.minimum(sft, 31).astype(_U), shape).reshape(1, -1)
    prod = _booth_tree(dm, np.ascontiguousarray(tab)[:, None], np.ascontiguousarray(s))
    return prod.astype(_I).reshape(shape)


def _operand(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(4 * coarse exponent ``e >> 2``, mantissa shifted by the fine exponent) of fp16 words;
    subnormals (``e = 0``) are shifted by 1 (cal_fp16_exp 387-431)."""
    e = (words >> 10) & 31
    mts = (words & 0x3FF) | ((e != 0).astype(_I) << 10)
    return (e >> 2) * 4, mts << np.where(e == 0, 1, e & 3)


def _weight_table(wt: np.ndarray) -> np.ndarray:
    """``[19, 2 * G * C, K]`` uint32 for weights ``[G, K, C]``: row ``(sd * G + g) * C + c`` of
    each table holds a Booth constant of weights ``(g, :, c)`` against data of sign ``sd``; the
    last table is ``4 * coarse`` (int32 bits; :data:`_ZERO_W` for +-0 weights)."""
    w = wt.transpose(0, 2, 1)  # [G, C, K]: a row of a table spans the kernels
    cw4, wm = _operand(w)
    cw4 = np.where(w & 0x7FFF == 0, _ZERO_W, cw4).astype(np.int32).view(_U)
    tab = np.empty((_ROWS, 2, *w.shape), _U)
    for sd in (0, 1):  # the data sign flips res_sign; decoded once for each
        tab[:18, sd] = np.moveaxis(booth_constants((w >> 15) ^ sd, wm), -1, 0)
        tab[_COARSE, sd] = cw4
    return tab.reshape(_ROWS, -1, w.shape[2])


def _with_nan(out: np.ndarray, words: np.ndarray, axis: int) -> np.ndarray:
    """``out`` ``[G, K, P]`` with the 44-bit NaN word of the lowest-channel NaN of ``words``
    ``[G, K or P, C]`` (broadcast along ``axis``) wherever there is one."""
    nan = (words & 0x7FFF) > 0x7C00
    if not nan.any():  # the common case: nothing to look up
        return out
    first = np.take_along_axis(words, np.argmax(nan, axis=-1)[..., None], axis=-1)[..., 0]
    word = (0x3F << 38) | ((first >> 15) << 37) | ((first & 0x3FF) << 27)
    return np.where(np.expand_dims(nan.any(axis=-1), axis), np.expand_dims(word, axis), out)


def _segment_words(dm, cd4, tab, starts, counts) -> np.ndarray:
    """The 44-bit words ``[segments, K]`` of consecutive pixels' taking-part entries: ``dm``,
    ``cd4`` ``[n]``, ``tab`` ``[19, n, K]``; segment ``i`` is entries ``starts[i]`` on
    (``counts[i]`` > 0 of them)."""
    coarse = tab[_COARSE].view(np.int32) + cd4[:, None]
    top = np.maximum.reduceat(coarse, starts, axis=0)
    np.maximum(top, 0, out=top)  # masked channels count as coarse 0
    sft = np.repeat(top, counts, axis=0)
    sft -= coarse  # >= 0; a +-0 weight gives >= 200
    np.minimum(sft, 31, out=sft)  # 31 gives the cmod's 0 for shifts >= 32 (p0, p1 < 2^31)
    dmk = np.repeat(dm[:, None], tab.shape[2], axis=1)  # contiguous operands: faster ufuncs
    prod = _booth_tree(dmk, tab, sft.view(_U))
    total = np.add.reduceat(prod, starts, axis=0, dtype=_I)  # |sum| < 64 * 2^28: exact
    return ((top.astype(_I) & 63) << 38) | (total & _M38)


def _entries(dat: np.ndarray) -> tuple:
    """The (pixel, channel) pairs of ``dat`` ``[G, P, C]`` whose datum is not +-0, pixel-major:
    (their words, group, channel, segment ids of the non-empty pixels, entries per segment)."""
    use = dat & 0x7FFF != 0
    counts = use.sum(axis=-1).ravel()
    gi, _, ci = np.nonzero(use)
    seg = np.flatnonzero(counts)
    return dat[use], gi, ci, seg, counts[seg]


def cmac_cell_fp16(dat, wt) -> np.ndarray:
    """The 44-bit result words of CMAC atomic ops: ``dat`` ``[..., P, C]`` and ``wt``
    ``[..., K, C]`` fp16 words (C <= 64 channels of one input position / kernel tap; leading
    dims broadcast, e.g. convolution groups) give ``[..., K, P]`` words ``E << 38 | M`` (int64)."""
    dat, wt = np.asarray(dat, dtype=_I), np.asarray(wt, dtype=_I)
    lead = np.broadcast_shapes(dat.shape[:-2], wt.shape[:-2])
    (p, c), k = dat.shape[-2:], wt.shape[-2]
    dat = np.broadcast_to(dat, (*lead, p, c)).reshape(-1, p, c)
    wt = np.broadcast_to(wt, (*lead, k, c)).reshape(-1, k, c)
    groups = dat.shape[0]
    words, gi, ci, seg, counts = _entries(dat)
    cd4, dm = _operand(words)
    rows = ((words >> 15) * groups + gi) * c + ci
    tab, dm, cd4 = _weight_table(wt), dm.astype(_U), cd4.astype(np.int32)
    out = np.zeros((groups * p, k), _I)
    starts = np.concatenate([[0], np.cumsum(counts)])
    per = max(1, _CHUNK // k)  # entries per block
    cuts = np.concatenate([[0], np.flatnonzero(np.diff(starts[:-1] // per)) + 1, [len(seg)]])
    for a, b in itertools.pairwise(cuts):  # blocks of whole pixels, not elements
        e0, e1 = starts[a], starts[b]
        block = np.take(tab, rows[e0:e1], axis=1)
        out[seg[a:b]] = _segment_words(dm[e0:e1], cd4[e0:e1], block, starts[a:b] - e0, counts[a:b])
    out = out.reshape(groups, p, k).transpose(0, 2, 1)
    out = _with_nan(_with_nan(out, dat, 1), wt, 2)  # a weight NaN wins over a data NaN
    return out.reshape(*lead, k, p)
