"""NVIDIA's NVDLA C-model floating point, vectorised (``cmod/hls/include/nvdla_float.h``).

NVDLA's FP16 pipeline does not compute in IEEE arithmetic. Its C model (nvdla/hw ``nvdlav1`` @
``8e06b1b9``), from which the RTL's FP units were generated, works on fp32 words and an fp17
format (1/6/10 bits, bias 31), and its primitives have their own edge rules:

- an exponent field of 0 with a non-zero mantissa reads as ``1.m x 2^-bias`` (a hidden 1);
- the all-ones exponent is an ordinary exponent unless the mantissa is non-zero (then NaN);
- results past the largest exponent are the largest finite value ("Inf" in the cmod's names):
  fp16 conversions saturate at ±65504, fp32 arithmetic at ±FLT_MAX;
- results below the normal range are zero (fp16 keeps its denormals);
- a NaN operand is returned unchanged (sign and payload), and conversions keep a NaN's *low*
  mantissa bits, so an fp32 NaN whose low 10 bits are 0 becomes the fp16 Inf pattern 0x7c00;
- ``FpAdd`` aligns the smaller operand into a ``2M+3``-bit window and drops what falls below
  it (no sticky bit); 4M far-apart pairs gave IEEE's results for normal sums all the same.

Every function takes and returns NumPy integer arrays of **bit patterns** (fp32 and fp17 words
as uint32, fp17 in the low 17 bits; fp16 as uint16), element-wise with broadcasting. Names carry
the rule (``rne``: round half to even; ``sat``: saturating). :mod:`.reference_nvdla_float` is
the scalar transcription they are tested against with ``==``; ``tools/nvdla_cmod_fp.py`` runs
the cmod itself.
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath.reference_nvdla_float import (
    FP16,
    FP17,
    FP32,
    LUT_ADDR_BITS,
    LUT_FRAC_BITS,
)

__all__ = [
    "fp16_bit_patterns",
    "fp16_max_nvdla",
    "fp16_min_nvdla",
    "fp16_to_fp17_nvdla",
    "fp16_to_fp32_nvdla",
    "fp16_to_int16_round_half_away_sat_nvdla",
    "fp17_add_rne_nvdla",
    "fp17_mul_rne_nvdla",
    "fp17_to_fp16_rne_sat_nvdla",
    "fp17_to_fp32_nvdla",
    "fp32_add_rne_nvdla",
    "fp32_eql_nvdla",
    "fp32_max_nvdla",
    "fp32_min_nvdla",
    "fp32_mul_rne_nvdla",
    "fp32_relu_nvdla",
    "fp32_sub_rne_nvdla",
    "fp32_to_fp16_rne_sat_nvdla",
    "fp32_to_fp17_rne_sat_nvdla",
    "fp32_to_int_frac_nvdla",
    "fraction_to_fp17_nvdla",
    "int17_to_fp16_rne_sat_nvdla",
]

_I = np.int64


def fp16_bit_patterns(a, where: str) -> np.ndarray:
    """fp16 data as int64 bit patterns 0..65535: a float16 array (its bits), or integers holding
    the raw 16-bit words (int16 or uint16 readings both accepted); else ``InvalidInputError``
    naming ``where``.

    >>> fp16_bit_patterns(np.array([1.0, -2.0], np.float16), "x").tolist()
    [15360, 49152]
    >>> fp16_bit_patterns(np.array([-1, 65535]), "x").tolist()
    [65535, 65535]
    """
    arr = np.asarray(a)
    if arr.dtype == np.float16:
        return arr.view(np.uint16).astype(_I)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -32768 or arr.max() > 65535)):
        got = f"dtype {arr.dtype}"
        if arr.dtype.kind in "iu" and arr.size:
            got += f" with values in [{arr.min()}, {arr.max()}]"
        raise InvalidInputError(
            f"{where} must be float16 data, or raw 16-bit words (int16/uint16), got {got}"
        )
    return arr.astype(_I) & 0xFFFF


def _split(bits, fmt):
    e, m = fmt
    b = np.asarray(bits).astype(_I)
    return (b >> (e + m)) & 1, (b >> m) & ((1 << e) - 1), b & ((1 << m) - 1)


def _join(sign, expo, mant, fmt):
    e, m = fmt
    return ((sign & 1) << (e + m)) | ((expo & ((1 << e) - 1)) << m) | (mant & ((1 << m) - 1))


def _inf(sign, fmt):
    e, m = fmt
    return _join(sign, (1 << e) - 2, (1 << m) - 1, fmt)


def _nan(expo, mant, fmt):
    return (expo == (1 << fmt[0]) - 1) & (mant != 0)


def _bit_length(x):
    """Bit length of non-negative int64 values, by a binary search on shifts."""
    x = np.asarray(x, dtype=_I)
    n = np.zeros(x.shape, dtype=_I)
    for step in (32, 16, 8, 4, 2, 1):
        big = (x >> (n + step)) > 0
        n = np.where(big, n + step, n)
    return np.where(x > 0, n + 1, 0)


def _mant_rne(value, in_width: int, out_width: int):
    """``FpMantRNE``: the top ``out_width`` of ``in_width`` bits rounded half to even
    (wrapping to 0 on overflow), and the overflow flag."""
    trunc = in_width - out_width
    top = (value >> trunc) & ((1 << out_width) - 1)
    guard = (value >> (trunc - 1)) & 1
    sticky = (value & ((1 << (trunc - 1)) - 1)) != 0
    carry = guard & (sticky | (top & 1)).astype(_I)
    overflow = (carry == 1) & (top == (1 << out_width) - 1)
    return (top + carry) & ((1 << out_width) - 1), overflow


def _shift(value, amount):
    """``value << amount`` for ``amount >= 0``, else ``value >> -amount`` (ac_int's signed
    shift); ``value`` is non-negative and fits the result."""
    left = np.clip(amount, 0, 62)
    right = np.clip(-amount, 0, 63)
    return np.where(amount >= 0, value << left, value >> right)


def _fp_add(a, b, fmt):
    e, m = fmt
    expo_max, more = (1 << e) - 1, m + 2
    width = more + m + 1
    mask = (1 << width) - 1
    (a_s, a_e, a_m), (b_s, b_e, b_m) = _split(a, fmt), _split(b, fmt)
    a_p1 = a_m | (((a_e != 0) | (a_m != 0)).astype(_I) << m)
    b_p1 = b_m | (((b_e != 0) | (b_m != 0)).astype(_I) << m)
    a_greater = (a_e > b_e) | ((a_e == b_e) & (a_m >= b_m))
    o_e = np.where(a_greater, a_e, b_e)
    a_int = _shift(a_p1, more - np.where(a_greater, 0, b_e - a_e)) & mask
    b_int = _shift(b_p1, more - np.where(a_greater, a_e - b_e, 0)) & mask
    o_s = np.where(a_greater, a_s, b_s)
    larger, smaller = np.where(a_greater, a_int, b_int), np.where(a_greater, b_int, a_int)
    total = np.where(a_s == b_s, larger + smaller, larger - smaller)
    carry_out = (total >> width) != 0
    is_inf = carry_out & (o_e >= expo_max - 1)
    # no carry: normalize so that bit width-1 is set, or flush to zero
    zeros = width - _bit_length(total & mask)
    flush = ~carry_out & ((o_e <= zeros) | ((total & mask) == 0))
    int_mant = np.where(carry_out, (total >> 1) & mask, (total << np.minimum(zeros, 62)) & mask)
    o_e = np.where(carry_out, np.where(is_inf, o_e, o_e + 1), np.where(flush, 0, o_e - zeros))
    int_mant = np.where(flush, 0, int_mant)
    o_p1, overflow = _mant_rne(int_mant, width, m + 1)
    is_inf |= overflow & (o_e >= expo_max - 1)
    o_e = np.where(overflow & ~is_inf, o_e + 1, o_e)
    out = np.where(is_inf, _inf(o_s, fmt), _join(o_s, o_e, o_p1, fmt))
    a64, b64 = np.asarray(a).astype(_I), np.asarray(b).astype(_I)
    return np.where(_nan(a_e, a_m, fmt), a64, np.where(_nan(b_e, b_m, fmt), b64, out))


def _fp_mul(a, b, fmt):
    e, m = fmt
    bias, expo_max = (1 << e) // 2 - 1, (1 << e) - 1
    p_width = 2 * m + 1
    (a_s, a_e, a_m), (b_s, b_e, b_m) = _split(a, fmt), _split(b, fmt)
    a_zero, b_zero = (a_e == 0) & (a_m == 0), (b_e == 0) & (b_m == 0)
    product = (a_m | ((~a_zero).astype(_I) << m)) * (b_m | ((~b_zero).astype(_I) << m))
    sign = a_s ^ b_s
    is_zero = a_zero | b_zero | (a_e + b_e < bias)
    is_inf = ~is_zero & (a_e + b_e >= expo_max + bias)
    p_e = np.clip(a_e + b_e - bias, 0, expo_max)
    top = (product >> p_width) != 0
    is_inf |= ~is_zero & top & (p_e >= expo_max - 1)
    p_e = np.where(top, p_e + 1, p_e)
    p_m = np.where(top, product, product << 1) & ((1 << p_width) - 1)
    o_m, overflow = _mant_rne(p_m | (1 << p_width), p_width + 1, m + 1)
    o_e = np.where(overflow, (p_e + 1) & expo_max, p_e & expo_max)
    is_inf |= overflow & (o_e == expo_max)
    out = np.where(is_inf, _inf(sign, fmt), _join(sign, o_e, o_m, fmt))
    zero = is_zero | (~is_inf & (o_e == 0))
    out = np.where(zero, _join(sign, 0, 0, fmt), out)
    a64, b64 = np.asarray(a).astype(_I), np.asarray(b).astype(_I)
    return np.where(_nan(a_e, a_m, fmt), a64, np.where(_nan(b_e, b_m, fmt), b64, out))


def fp32_add_rne_nvdla(a, b) -> np.ndarray:
    """cmod ``FpAdd<8,23>`` of fp32 words (module docstring).

    >>> [hex(v) for v in fp32_add_rne_nvdla(np.array([0x3F800000, 0x7F800000], np.uint32),
    ...                                     np.array([0x3F800000, 0xFF800000], np.uint32))]
    ['0x40000000', '0x0']
    """
    return _fp_add(a, b, FP32).astype(np.uint32)


def fp32_sub_rne_nvdla(a, b) -> np.ndarray:
    """cmod ``FpSub<8,23>``: ``FpAdd(a, -b)``."""
    return _fp_add(a, np.asarray(b).astype(_I) ^ (1 << 31), FP32).astype(np.uint32)


def fp32_mul_rne_nvdla(a, b) -> np.ndarray:
    """cmod ``FpMul<8,23>`` of fp32 words: overflow gives ±FLT_MAX, a zero exponent zero.

    >>> [hex(v) for v in fp32_mul_rne_nvdla(np.array([0x7F000000, 0x7FC00001], np.uint32),
    ...                                     np.array([0x40000000, 0x00000000], np.uint32))]
    ['0x7f7fffff', '0x7fc00001']
    """
    return _fp_mul(a, b, FP32).astype(np.uint32)


def fp17_add_rne_nvdla(a, b) -> np.ndarray:
    """cmod ``Fp17Add`` (``FpAdd<6,10>``) of fp17 words."""
    return _fp_add(a, b, FP17).astype(np.uint32)


def fp17_mul_rne_nvdla(a, b) -> np.ndarray:
    """cmod ``Fp17Mul`` (``FpMul<6,10>``) of fp17 words."""
    return _fp_mul(a, b, FP17).astype(np.uint32)


def _fp_cmp(a, b, *, maximum: bool, fmt=FP32):
    (a_s, a_e, a_m), (b_s, b_e, b_m) = _split(a, fmt), _split(b, fmt)
    abs_greater = (a_e > b_e) | ((a_e == b_e) & (a_m > b_m))
    a_greater = np.where(a_s == 0, np.where(b_s == 0, abs_greater, True),
                         np.where(b_s == 0, False, ~abs_greater))  # fmt: skip
    a64, b64 = np.asarray(a).astype(_I), np.asarray(b).astype(_I)
    out = np.where(a_greater, a64, b64) if maximum else np.where(a_greater, b64, a64)
    out = np.where(_nan(a_e, a_m, fmt), a64, np.where(_nan(b_e, b_m, fmt), b64, out))
    return out.astype(np.uint32 if fmt == FP32 else np.uint16)


def fp32_max_nvdla(a, b) -> np.ndarray:
    """cmod ``FpMax<8,23>``: sign, then magnitude (-0 < +0); the first NaN operand wins."""
    return _fp_cmp(a, b, maximum=True)


def fp32_min_nvdla(a, b) -> np.ndarray:
    """cmod ``FpMin<8,23>``."""
    return _fp_cmp(a, b, maximum=False)


def fp16_max_nvdla(a, b) -> np.ndarray:
    """cmod ``FpMax<5,10>`` of fp16 words (the PDP's max pooling)."""
    return _fp_cmp(a, b, maximum=True, fmt=FP16)


def fp16_min_nvdla(a, b) -> np.ndarray:
    """cmod ``FpMin<5,10>`` of fp16 words."""
    return _fp_cmp(a, b, maximum=False, fmt=FP16)


def fp32_eql_nvdla(a, b) -> np.ndarray:
    """cmod ``FpEql<8,23>``: the word 1 where the bit patterns are equal (+0 != -0, a NaN equals
    the same NaN), else 0."""
    return (np.asarray(a).astype(_I) == np.asarray(b).astype(_I)).astype(np.uint32)


def fp32_relu_nvdla(a) -> np.ndarray:
    """cmod ``FpRelu<8,23>``: a set sign bit gives +0 (also -0 and -Inf); NaN passes."""
    s, e, m = _split(a, FP32)
    keep = _nan(e, m, FP32) | (s == 0)
    return np.where(keep, np.asarray(a).astype(_I), 0).astype(np.uint32)


def _width_inc(bits, src, dst, *, denorm: bool):
    (ie, im), (oe, om) = src, dst
    s, e, mnt = _split(bits, src)
    nan = _nan(e, mnt, src)
    wide = np.where(nan, mnt, mnt << (om - im))
    delta = ((1 << oe) // 2 - 1) - ((1 << ie) // 2 - 1)
    zero = (e == 0) & (wide == 0)
    o_e = np.where(zero, 0, e + delta)
    o_m = wide
    if denorm:
        den = (e == 0) & (wide != 0)
        zeros = om - _bit_length(wide)
        o_e = np.where(den, delta - zeros, o_e)
        o_m = np.where(den, (wide << np.clip(zeros + 1, 0, 62)) & ((1 << om) - 1), o_m)
    out = _join(s, o_e, o_m, dst)
    out = np.where((e == (1 << ie) - 1) & (wide == 0), _inf(s, dst), out)
    return np.where(nan, _join(s, (1 << oe) - 1, wide, dst), out)


def _width_dec(bits, src, dst, *, denorm: bool):
    (ie, im), (oe, om) = src, dst
    o_max = (1 << oe) - 1
    delta = ((1 << ie) // 2 - 1) - ((1 << oe) // 2 - 1)
    s, e, mnt = _split(bits, src)
    # denormal range: FpMantDecShiftRight on the (im + 1)-bit mantissa with its implied 1
    shift = np.clip(delta - e + 1, 1, im + 1)
    p1 = mnt | (1 << im)
    p1_mask = (1 << (im + 1)) - 1
    lo = im - om
    guard_pos, least_pos = lo + shift - 1, lo + shift
    guard_bit = np.where(guard_pos <= im, np.int64(1) << np.minimum(guard_pos, 62), 0) & p1_mask
    least_bit = np.where(least_pos <= im, np.int64(1) << np.minimum(least_pos, 62), 0) & p1_mask
    carry = ((p1 & guard_bit) != 0) & (
        ((p1 & ((guard_bit - 1) & p1_mask)) != 0) | ((p1 & least_bit) != 0)
    )
    total = (((p1 >> shift) >> lo) & ((1 << (om + 1)) - 1)) + carry.astype(_I)
    den_m, den_over = total & ((1 << om) - 1), ((total >> om) & 1) == 1
    # normal range
    n_p1, n_over = _mant_rne(p1, im + 1, om + 1)
    n_e = e - delta + n_over.astype(_I)
    normal = _join(s, n_e, n_p1, dst)
    normal = np.where(n_over & (n_e == o_max), _inf(s, dst), normal)
    if denorm:
        sub = _join(s, np.where(den_over, 1, 0), den_m, dst)
    else:
        sub = np.where(den_over, _join(s, 1, den_m, dst), _join(s, 0, 0, dst))
    out = np.where(e <= delta, sub, normal)
    out = np.where(e < delta - om, _join(s, 0, 0, dst), out)
    out = np.where(e >= o_max + delta, _inf(s, dst), out)
    return np.where(_nan(e, mnt, src), _join(s, o_max, mnt, dst), out)


def fp16_to_fp32_nvdla(h) -> np.ndarray:
    """cmod ``Fp16ToFp32``: exact for finite values (denormals become normal), ±Inf gives
    ±FLT_MAX, a NaN's payload lands in the low mantissa bits.

    >>> [hex(v) for v in fp16_to_fp32_nvdla(np.array([0x3C00, 0x7C00, 0x7E00, 0x0001], np.uint16))]
    ['0x3f800000', '0x7f7fffff', '0x7f800200', '0x33800000']
    """
    return _width_inc(h, FP16, FP32, denorm=True).astype(np.uint32)


def fp16_to_fp17_nvdla(h) -> np.ndarray:
    """cmod ``Fp16ToFp17``."""
    return _width_inc(h, FP16, FP17, denorm=True).astype(np.uint32)


def fp17_to_fp32_nvdla(x) -> np.ndarray:
    """cmod ``Fp17ToFp32``: exact (an fp17 denormal reads with a hidden 1)."""
    return _width_inc(x, FP17, FP32, denorm=False).astype(np.uint32)


def fp17_to_fp16_rne_sat_nvdla(x) -> np.ndarray:
    """cmod ``Fp17ToFp16`` (``FpExpoWidthDec<6,5,10>``): the mantissa kept, fp16 denormals by a
    right shift rounded half to even, saturating at ±65504, a NaN's mantissa kept.

    >>> [hex(v) for v in fp17_to_fp16_rne_sat_nvdla(np.array([0x7C00, 0x1FBFF, 0x4001], np.uint32))]
    ['0x3c00', '0xfbff', '0x200']
    """
    s, e, mnt = _split(x, FP17)
    m, delta, o_max = 10, 16, 31
    shift = np.clip(delta - e + 1, 1, m + 1)
    p1 = mnt | (1 << m)
    guard = (p1 >> (shift - 1)) & 1
    sticky = (p1 & ((np.int64(1) << (shift - 1)) - 1)) != 0
    least = (p1 >> shift) & 1  # the (m+1)-bit type holds bit m; a shift of m+1 reads 0
    carry = guard & (sticky | (least == 1)).astype(_I)
    total = ((p1 >> shift) & ((1 << (m + 1)) - 1)) + carry
    sub = _join(s, (total >> m) & 1, total & ((1 << m) - 1), FP16)
    out = np.where(e <= delta, sub, _join(s, e - delta, mnt, FP16))
    out = np.where(e < delta - m, _join(s, 0, 0, FP16), out)
    out = np.where(e >= o_max + delta, _inf(s, FP16), out)
    return np.where(_nan(e, mnt, FP17), _join(s, o_max, mnt, FP16), out).astype(np.uint16)


def fp32_to_fp16_rne_sat_nvdla(f) -> np.ndarray:
    """cmod ``Fp32ToFp16``: round half to even (denormals included), saturating at ±65504
    (also for ±Inf), fp32 denormals to ±0, NaN keeps its low 10 mantissa bits.

    >>> [hex(v) for v in fp32_to_fp16_rne_sat_nvdla(
    ...     np.array([0x3F800000, 0x7F800000, 0x7FC00000, 0x33000000, 0x33000001], np.uint32))]
    ['0x3c00', '0x7bff', '0x7c00', '0x0', '0x1']
    """
    return _width_dec(f, FP32, FP16, denorm=True).astype(np.uint16)


def fp32_to_fp17_rne_sat_nvdla(f) -> np.ndarray:
    """cmod ``Fp32ToFp17``: as ``Fp32ToFp16`` into 6/10 bits, without denormals."""
    return _width_dec(f, FP32, FP17, denorm=False).astype(np.uint32)


def fp16_to_int16_round_half_away_sat_nvdla(h) -> np.ndarray:
    """cmod ``Fp16ToInt16``: round half away from zero, saturate to int16; NaN is -32768.

    >>> fp16_to_int16_round_half_away_sat_nvdla(
    ...     np.array([0x3800, 0x4100, 0xB800, 0x7C00, 0x7E00], np.uint16)).tolist()
    [1, 3, -1, 32767, -32768]
    """
    s, e, mnt = _split(h, FP16)
    p1 = mnt | (1 << 10)
    shift = 10 - (e - 15)
    right = np.clip(shift, 1, 62)
    magnitude = np.where(
        shift <= 0, p1 << np.clip(-shift, 0, 62), (p1 + (np.int64(1) << (right - 1))) >> right
    )
    out = np.where(magnitude > 32767, np.where(s == 1, -32768, 32767),
                   np.where(s == 1, -magnitude, magnitude))  # fmt: skip
    return np.where(_nan(e, mnt, FP16), -32768, out).astype(np.int16)


def int17_to_fp16_rne_sat_nvdla(v) -> np.ndarray:
    """cmod ``Int17ToFp16``: round half to even; results that would reach 65520 saturate to
    ±65504.

    >>> [hex(x) for x in int17_to_fp16_rne_sat_nvdla(np.array([1, -2, 2049, 65519, 65520]))]
    ['0x3c00', '0xc000', '0x6800', '0x7bff', '0x7bff']
    """
    v = np.asarray(v).astype(_I)
    s = (v < 0).astype(_I)
    mag = np.abs(v) & ((1 << 17) - 1)
    zeros = 17 - _bit_length(mag)
    o_e = 31 - zeros
    o_p1, overflow = _mant_rne((mag << np.clip(zeros, 0, 17)) & ((1 << 17) - 1), 17, 11)
    inf = (o_e == 31) | (overflow & (o_e >= 30))
    out = np.where(inf, _inf(s, FP16), _join(s, o_e + overflow.astype(_I), o_p1, FP16))
    return np.where(v == 0, 0, out).astype(np.uint16)


def fp32_to_int_frac_nvdla(f, rshift) -> tuple[np.ndarray, np.ndarray]:
    """cmod ``FpFloatToIntFrac<8,23,8,9,35>`` (the LUT's linear index): ``f x 2^-rshift`` as a
    9-bit index saturated at 511 and 35 fraction bits; the hidden bit is always 1, the unbiased
    exponent is held in 8 signed bits (the exponent field 255 wraps to -128), NaN gives (0, 0)."""
    _, e, mnt = _split(f, FP32)
    p1 = mnt | (1 << 23)
    abs_expo = ((e - 127 + 128) & 0xFF) - 128
    lshift = abs_expo - np.asarray(rshift).astype(_I) - 23
    top = (1 << LUT_ADDR_BITS) - 1
    integer = np.where(lshift >= 0, top, np.minimum(p1 >> np.clip(-lshift, 0, 63), top))
    k = LUT_FRAC_BITS + lshift
    frac = np.where(k >= 0, p1 << np.clip(k, 0, 62), p1 >> np.clip(-k, 0, 63))
    frac = np.where(lshift >= 0, 0, frac & ((1 << LUT_FRAC_BITS) - 1))
    nan = _nan(e, mnt, FP32)
    return np.where(nan, 0, integer).astype(np.uint32), np.where(nan, 0, frac).astype(np.uint64)


def fraction_to_fp17_nvdla(frac, width: int = LUT_FRAC_BITS) -> np.ndarray:
    """cmod ``FpFractionToFloat<width,6,10>``: the ``width``-bit fraction ``0.f`` as fp17, round
    half to even (the SDP LUT's interpolation weights: 35 bits; the CDP's: 16); 0 gives +0."""
    frac = np.asarray(frac).astype(_I)
    zeros = width - _bit_length(frac)
    shifted = (frac << np.clip(zeros + 1, 0, 62)) & ((1 << (width + 1)) - 1)
    o_p1, overflow = _mant_rne(shifted, width + 1, 11)
    bias = 31
    rounded_up = _join(0, bias - zeros, o_p1 >> 1, FP17)
    plain = np.where(bias <= zeros + 1, 0, _join(0, bias - zeros - 1, o_p1, FP17))
    out = np.where(overflow, rounded_up, plain)
    return np.where(frac == 0, 0, out).astype(np.uint32)
