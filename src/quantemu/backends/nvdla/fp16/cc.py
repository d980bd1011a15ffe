"""Direct convolution in FP16 through CMAC and CACC, as NVIDIA's C model computes it.

nvdla/hw ``nvdlav1`` @ ``8e06b1b9`` (see ``CONV_NOTES.md`` §1 for the line references):

1. **CMAC atomic op** (``NvdlaMacCell::calculation_fp16``, ``cmac/NV_NVDLA_cmac.h`` 301-835), 64
   channels of one input position times 64 channels of one kernel tap:

   - a NaN weight (lowest channel first), else a NaN datum, gives the 44-bit word
     ``0x3f << 38 | sign << 37 | payload << 27`` (masks ignored: NaN * 0 is NaN);
   - a channel takes part only if its datum **and** its weight are not +-0 (CSC's masks);
   - ``coarse = (e_d >> 2) + (e_w >> 2)`` (exponent fields; 31 is ordinary, Inf is 65536), the
     block exponent is the largest ``coarse``; mantissas ``((e != 0) << 10 | frac) << (e & 3)``
     (subnormals: ``<< 1``);
   - each product is the cmod's radix-4 Booth multiplier with its carry-save tree, the two
     carry-save vectors each shifted right by ``4 * (max - coarse)`` (:func:`booth_fp16`, ported
     as written: there is no closed form), 0 for a shift of 32 or more;
   - :mod:`.cmac` computes it (:func:`cmac_cell_fp16`) with the Booth digits decoded once
     per weight and only the channels that take part formed, which changes no bit;
   - the products are summed exactly: ``E = 4 * max`` (6 bits) and a 38-bit mantissa ``M``,
     value ``M * 2^(E - 50)``.

2. **CACC** (``cacc/NV_NVDLA_cacc.cpp`` 1243-1627): ``acc = add(0, P_first)``, then
   ``acc = add(acc, P)`` for the other atomic ops, channel group (64 channels) outer, kernel taps
   inner in row-major order. The accumulator is an "fp48": 8-bit exponent ``A`` and a 40-bit
   normalised two's-complement mantissa ``m``, value ``m * 2^(A - 101)``, ``A = 255`` NaN
   (:func:`cacc_add_fp16`: alignment without sticky past 40 bits, shifted-out bits shifted back
   in on normalisation, rounding half away from zero). The output is
   :func:`cacc_fp48_to_fp32`: the fp32 word CACC sends to the SDP (guard-bit rounding, NaN
   payload in bits 9..0; no clipping or saturation in FP16).

Padded positions carry ``pad_value`` (raw fp16 word) in every channel of the group; channels past
C are 0 in data and weights. :mod:`.reference` is the scalar twin this module is tested
against with ``==``; ``tests/data/nvdla_conv_fp16`` holds vectors recorded from the cmod itself.
:func:`conv_fp16_grouped` runs grouped convolutions (ONNX ``group``), each group its own NVDLA
convolution, all groups at once. Not modelled: Winograd, image input, batches.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.fp16.cmac import booth_fp16, cmac_cell_fp16  # noqa: F401 (public here)
from quantemu.errors import InvalidInputError
from quantemu.intmath.nvdla_float import fp16_bit_patterns

_I = np.int64
_M38 = (1 << 38) - 1
_M40 = (1 << 40) - 1
CHANNELS = 64  # PARALLEL_CHANNEL_NUM: fp16 channels per atomic op
MAX_GEOMETRY = 1 << 13  # strides, dilations and pads: NVDLA's 13-bit cube sizes bound them


def _sx(v, bits: int):
    """The low ``bits`` bits of ``v`` (int64) as a signed number."""
    v = np.asarray(v, dtype=_I) & ((1 << bits) - 1)
    return v - ((v >> (bits - 1)) << bits)


def _bitlen(v: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2^53 (exact through ``frexp``)."""
    return np.frexp(v.astype(np.float64))[1].astype(_I)


def _shl40(v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The low 40 bits of ``v << k`` (``k`` < 64), computed without signed overflow."""
    u = (np.asarray(v, dtype=_I) & _M40).astype(np.uint64)
    return ((u << np.asarray(k).astype(np.uint64)) & np.uint64(_M40)).astype(_I)


def _align(e_mac, e_acc, m_mac, m_acc):
    """Exponent alignment (1384-1407): (bigger exponent, mac, accu, shifted-out bits)."""
    d = np.abs(e_mac - e_acc)
    small = np.where(e_mac > e_acc, m_acc, m_mac)
    dd = np.minimum(d, 40)
    low = small & ((np.int64(1) << dd) - 1)
    sob = np.where((d > 0) & (d <= 40), (low << (40 - dd)) & _M40, 0)
    shifted = np.where(d <= 40, small >> dd, 0)
    m_acc = np.where(e_mac > e_acc, shifted, m_acc)
    m_mac = np.where(e_mac < e_acc, shifted, m_mac)
    return np.maximum(e_mac, e_acc), m_mac, m_acc, sob


def _normalise_sum(a, m, sob, big):
    """The 40-bit sum, its overflow shift or left normalisation (1412-1440) and rounding flag."""
    raw = a + m
    tmp = _sx(raw, 40)
    over = ((m < 0) == (a < 0)) & ((m < 0) != (tmp < 0))
    k = 39 - _bitlen(np.where(tmp < 0, ~tmp, tmp))
    left = ~over & (k > 0)
    kk = np.where(left, k, 0)
    shifted = _sx(_shl40(tmp, kk) | (sob >> (40 - kk)), 40)
    summ = np.where(over, raw >> 1, np.where(left, shifted, tmp))
    sob = np.where(left, _shl40(sob, kk), sob)
    e = np.where(over, big + 1, big - kk)
    neg = summ < 0
    g1, s1 = raw & 1, (sob != 0).astype(_I)
    g0, s0 = (sob >> 39) & 1, ((sob & ((1 << 39) - 1)) != 0).astype(_I)
    need = np.where(over, np.where(neg, g1 & s1, g1), np.where(neg, g0 & s0, g0))
    return summ, e, neg, need


def cacc_add_fp16(accu, mac) -> np.ndarray:
    """``NV_NVDLA_cacc::cacc_fp16_add``: a 48-bit accumulator word plus a 44-bit CMAC word, both
    as int64 arrays (broadcast), giving the new 48-bit word."""
    accu, mac = np.broadcast_arrays(np.asarray(accu, dtype=_I), np.asarray(mac, dtype=_I))
    mexp, mm = (mac >> 38) & 63, _sx(mac, 38)
    aexp, am = (accu >> 40) & 255, _sx(accu, 40)
    n = 37 - _bitlen(np.where(mm < 0, ~mm, mm))
    e_mac = (mexp - n + 49) & 255
    e_acc = np.where(am == 0, 0, aexp)
    big, m_ext, a_ext, sob = _align(e_mac, e_acc, _sx(mm << np.maximum(n, 0), 38) * 4, am)
    summ, e, neg, need = _normalise_sum(a_ext, m_ext, sob, big)
    r = _sx(summ + need, 40)
    carry = (r < 0) != neg
    fin = np.where(carry, _sx((neg.astype(_I) << 39) | ((r & _M40) >> 1), 40), r)
    e = np.where(carry, e + 1, e)
    e = np.where(fin == 0, 0, e)
    out = ((e & 255) << 40) | (fin & _M40)
    out = np.where(mexp == 63, (255 << 40) | (((mac >> 27) & 0x7FF) << 29), out)
    out = np.where(aexp == 255, (255 << 40) | (((accu >> 29) & 0x7FF) << 29), out)
    return np.where(mm == 0, accu, out)


def cacc_fp48_to_fp32(accu) -> np.ndarray:
    """``NV_NVDLA_cacc::cacc_fp48_to_fp32``: 48-bit accumulator words to fp32 words (int64)."""
    accu = np.asarray(accu, dtype=_I)
    e, m = (accu >> 40) & 255, _sx(accu, 40)
    sign = (m < 0).astype(_I)
    mag = np.abs(m)
    e32 = np.where(m == 0, 0, (e + 64) & 255)
    t = (mag >> 15) + ((mag >> 14) & 1)
    carry = t >> 24
    out = (sign << 31) | (((e32 + carry) & 255) << 23) | ((t >> carry) & 0x7FFFFF)
    out = np.where(m == -(1 << 39), (1 << 31) | (((e + 65) & 255) << 23), out)
    nan = (((accu >> 39) & 1) << 31) | 0x7F800000 | ((accu >> 29) & 0x3FF)
    return np.where(e == 255, nan, out)


def fp16_words(a, name: str, ndim: int) -> np.ndarray:
    """fp16 data as int64 bit patterns (:func:`fp16_bit_patterns`), with ``ndim`` dimensions."""
    words = fp16_bit_patterns(a, f"conv_fp16: {name}")
    if words.ndim != ndim:
        raise InvalidInputError(f"conv_fp16: {name} must have {ndim} dimensions, got {words.shape}")
    return words


def _ints(v, count: int, name: str, lo: int, what: str) -> tuple[int, ...]:
    """``v`` as ``count`` Python ints >= ``lo`` (an int repeats), else InvalidInputError."""
    scalar = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    items = [v] * count if scalar else list(v) if isinstance(v, (tuple, list)) else [v]
    ok = len(items) == count and all(
        isinstance(u, (int, np.integer)) and not isinstance(u, bool) and lo <= u < MAX_GEOMETRY
        for u in items
    )
    if not ok:
        raise InvalidInputError(f"conv_fp16: {name} must be {what}, got {v!r}")
    return tuple(int(u) for u in items)


def _pair(v, name: str) -> tuple[int, int]:
    return _ints(v, 2, name, 1, f"an int in [1, {MAX_GEOMETRY}) or (y, x) of them")


def conv_geometry(shape_x, shape_w, stride, dilation, padding) -> tuple[int, int]:
    """(OH, OW) of the convolution, with clear errors for impossible geometries."""
    (c, h, wd), (k, cw, r, s) = shape_x, shape_w
    if cw != c or min(c, h, wd, k, r, s) < 1:
        raise InvalidInputError(
            f"conv_fp16: x {shape_x} (C, H, W) and w {shape_w} (K, C, R, S) must be non-empty "
            "with the same C"
        )
    (sy, sx), (dy, dx) = stride, dilation
    pl, pt, pr, pb = padding
    oh = (h + pt + pb - (r - 1) * dy - 1) // sy + 1
    ow = (wd + pl + pr - (s - 1) * dx - 1) // sx + 1
    if oh < 1 or ow < 1:
        raise InvalidInputError(
            f"conv_fp16: the {r}x{s} kernel (dilation {dy}x{dx}) does not fit the padded "
            f"{h + pt + pb}x{wd + pl + pr} input; pad more or use a smaller kernel"
        )
    return oh, ow


def _padding(padding) -> tuple[int, int, int, int]:
    return _ints(
        padding, 4, "padding", 0, f"an int in [0, {MAX_GEOMETRY}) or (left, top, right, bottom)"
    )


def _accumulate(acc: np.ndarray, mac: np.ndarray) -> np.ndarray:
    """:func:`cacc_add_fp16` of every element, computed only where the CMAC mantissa is not 0:
    elsewhere the cmod returns the accumulator unchanged (1322), and after ReLU many are 0."""
    live = np.flatnonzero(mac & _M38)
    if live.size > mac.size * 3 // 4:  # mostly live: gathering would cost more than it saves
        return cacc_add_fp16(acc, mac)
    out = acc.copy()
    out.flat[live] = cacc_add_fp16(acc.flat[live], mac.flat[live])
    return out


def _pad_value(pad_value) -> int:
    if (
        not isinstance(pad_value, (int, np.integer))
        or isinstance(pad_value, bool)
        or not 0 <= pad_value <= 0xFFFF
    ):
        raise InvalidInputError(
            f"conv_fp16: pad_value must be an fp16 word 0..65535, got {pad_value!r}"
        )
    return int(pad_value)


def _groups(groups, shape_x, shape_w) -> int:
    """``groups`` checked against x ``[C, H, W]`` and w ``[K, C / groups, R, S]``."""
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise InvalidInputError(f"conv_fp16: groups must be an int >= 1, got {groups!r}")
    (c, _, _), (k, cg, _, _) = shape_x, shape_w
    if groups > 1 and (c % groups or k % groups or cg * groups != c):
        raise InvalidInputError(
            f"conv_fp16: groups = {groups} must divide C = {c} and K = {k}, and w {shape_w} "
            f"(K, C / groups, R, S) must have {c // groups} channels"
        )
    return int(groups)


def conv_fp16_grouped(
    x, w, *, groups: int, stride=1, dilation=1, padding=0, pad_value: int = 0
) -> np.ndarray:
    """Grouped direct convolution (ONNX semantics) of fp16 data ``x`` ``[C, H, W]`` (or a batch
    ``[N, C, H, W]``) with fp16 weights ``w`` ``[K, C / groups, R, S]``: the fp32 words
    ``[K, OH, OW]`` (``[N, K, OH, OW]``; uint32) CACC sends to the SDP. Each group of each
    sample is an independent NVDLA convolution (its own 64-channel groups) of channels
    ``g * C / groups ...`` into kernels ``g * K / groups ...``; all are computed together (the
    samples' pixels side by side: every output is its own CMAC/CACC chain). Geometry as in
    :func:`conv_fp16`, which is this with ``groups=1``.

    >>> x = np.array([2, 3], np.float16).reshape(2, 1, 1)
    >>> conv_fp16_grouped(x, np.ones((2, 1, 1, 1), np.float16), groups=2).view(np.float32).ravel()
    array([2., 3.], dtype=float32)
    """
    batched = np.ndim(x) == 4
    xw, ww = fp16_words(x, "x", 4 if batched else 3), fp16_words(w, "w", 4)
    xw = xw if batched else xw[None]
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads, pad_value = _padding(padding), _pad_value(pad_value)
    groups = _groups(groups, xw.shape[1:], ww.shape)
    (n, c, h, wd), (k, cg, r, s) = xw.shape, ww.shape
    oh, ow = conv_geometry((c // groups, h, wd), ww.shape, stride, dilation, pads)
    (sy, sx), (dy, dx), (pl, pt, pr, pb) = stride, dilation, pads
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), pad_value, _I)  # every real channel padded
    xp[:, :, pt : pt + h, pl : pl + wd] = xw
    xp = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = ww.reshape(groups, k // groups, cg, r, s)
    acc = None
    # CSC's order: 64-channel groups outer, kernel taps inner (row-major); channels past C are
    # left out, as their zero data and weights take no part in an atomic op
    for c0 in range(0, cg, CHANNELS):
        chans = slice(c0, c0 + CHANNELS)
        for i in range(r):
            for j in range(s):
                rows = slice(i * dy, i * dy + (oh - 1) * sy + 1, sy)
                cols = slice(j * dx, j * dx + (ow - 1) * sx + 1, sx)
                dat = xp[:, :, chans, rows, cols].transpose(1, 0, 3, 4, 2)  # [g, N, OH, OW, c]
                dat = dat.reshape(groups, n * oh * ow, -1)
                mac = cmac_cell_fp16(dat, wg[:, :, chans, i, j])  # [groups, K / groups, N*P]
                acc = _accumulate(np.zeros_like(mac) if acc is None else acc, mac)
    out = cacc_fp48_to_fp32(acc).astype(np.uint32).reshape(groups, k // groups, n, oh, ow)
    out = out.transpose(2, 0, 1, 3, 4).reshape(n, k, oh, ow)
    return out if batched else out[0]


def conv_fp16(x, w, *, stride=1, dilation=1, padding=0, pad_value: int = 0) -> np.ndarray:
    """Direct convolution of fp16 data ``x`` ``[C, H, W]`` with fp16 weights ``w``
    ``[K, C, R, S]`` (float16 or raw uint16/int16 words) through CMAC and CACC: the fp32 words
    CACC sends to the SDP, ``[K, OH, OW]`` uint32.

    ``stride`` and ``dilation`` are ints or ``(y, x)``; ``padding`` an int or ``(left, top,
    right, bottom)``; ``pad_value`` the raw fp16 word of padded positions (D_ZERO_PADDING_VALUE).

    >>> one = np.ones((1, 1, 1), np.float16)
    >>> hex(int(conv_fp16(one * 3, one[None] * 2)[0, 0, 0]))
    '0x40c00000'
    """
    return conv_fp16_grouped(
        x, w, groups=1, stride=stride, dilation=dilation, padding=padding, pad_value=pad_value
    )
