"""Scalar references of NVIDIA's NVDLA C-model floating point (``cmod/hls/include/nvdla_float.h``).

One value at a time, on Python ints holding **bit patterns**, transcribed function by function
from nvdla/hw ``nvdlav1`` @ ``8e06b1b9`` (``FpAdd``, ``FpMul``, ``FpWidthDec``, ...): the same
field widths, the same truncations, the same order of tests. :mod:`.nvdla_float` is the
vectorised twin, tested against these with ``==``; both are checked against the cmod itself where
its sources and a C++ compiler are available (``tools/nvdla_cmod_fp.py``).

Formats are ``(E, M)``: fp32 ``(8, 23)``, fp17 ``(6, 10)``, fp16 ``(5, 10)``. The cmod's own edge
rules, which differ from IEEE 754: an exponent field of 0 with a non-zero mantissa reads as
``1.m x 2^(1-bias-1)`` (a hidden 1), the all-ones exponent is an ordinary exponent unless the
mantissa is non-zero (NaN), "Inf" results are the largest finite value, and results below the
normal range are zero.
"""

from __future__ import annotations

FP32 = (8, 23)
FP17 = (6, 10)
FP16 = (5, 10)


def split(bits: int, fmt: tuple[int, int]) -> tuple[int, int, int]:
    """``(sign, exponent, mantissa)`` fields of ``bits``."""
    e, m = fmt
    return (bits >> (e + m)) & 1, (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


def join(sign: int, expo: int, mant: int, fmt: tuple[int, int]) -> int:
    """The bit pattern of the fields (each masked to its width, as ``set_slc`` does)."""
    e, m = fmt
    return ((sign & 1) << (e + m)) | ((expo & ((1 << e) - 1)) << m) | (mant & ((1 << m) - 1))


def is_nan(expo: int, mant: int, fmt: tuple[int, int]) -> bool:
    return expo == (1 << fmt[0]) - 1 and mant != 0


def _inf(sign: int, fmt: tuple[int, int]) -> int:
    """``SetToInf``: the largest finite value, sign kept."""
    e, m = fmt
    return join(sign, (1 << e) - 2, (1 << m) - 1, fmt)


def leading_zeros(x: int, width: int) -> int:
    """``IntLeadZero<width>`` (``leading_sign`` of an unsigned value; ``width`` for 0)."""
    return width - x.bit_length()


def mant_rne(value: int, in_width: int, out_width: int) -> tuple[int, bool]:
    """``FpMantRNE<in, out>``: keep the top ``out_width`` bits, round half to even; returns
    ``(out, overflow)`` where the rounded value wraps to 0 on overflow."""
    trunc = in_width - out_width
    top = (value >> trunc) & ((1 << out_width) - 1)
    guard = (value >> (trunc - 1)) & 1
    sticky = (value & ((1 << (trunc - 1)) - 1)) != 0
    carry = guard & (sticky | (top & 1))
    overflow = bool(carry) and top == (1 << out_width) - 1
    return (top + carry) & ((1 << out_width) - 1), overflow


def fp_add(a: int, b: int, fmt: tuple[int, int]) -> int:
    """``FpAdd<E, M>``: align into ``2M+3`` bits (the smaller operand's bits below them are
    dropped: the cmod keeps no sticky bit), add or subtract, normalize, round half to even."""
    e, m = fmt
    expo_max = (1 << e) - 1
    more = m + 2
    width = more + m + 1
    a_s, a_e, a_m = split(a, fmt)
    b_s, b_e, b_m = split(b, fmt)
    a_p1 = a_m | ((0 if (a_e == 0 and a_m == 0) else 1) << m)
    b_p1 = b_m | ((0 if (b_e == 0 and b_m == 0) else 1) << m)
    a_greater = a_e > b_e or (a_e == b_e and a_m >= b_m)
    o_e = a_e if a_greater else b_e
    a_shift = more - (0 if a_greater else b_e - a_e)
    b_shift = more - ((a_e - b_e) if a_greater else 0)
    mask = (1 << width) - 1
    a_int = ((a_p1 << a_shift) if a_shift >= 0 else (a_p1 >> -a_shift)) & mask
    b_int = ((b_p1 << b_shift) if b_shift >= 0 else (b_p1 >> -b_shift)) & mask
    o_s = a_s if a_greater else b_s
    larger, smaller = (a_int, b_int) if a_greater else (b_int, a_int)
    total = larger + smaller if a_s == b_s else larger - smaller
    is_inf = False
    int_mant = 0
    if total >> width:
        if o_e < expo_max - 1:
            o_e += 1
            int_mant = (total >> 1) & mask
        else:
            is_inf = True
    else:
        int_mant = total & mask
        zeros = leading_zeros(int_mant, width)
        if o_e <= zeros or int_mant == 0:
            o_e, int_mant = 0, 0
        else:
            o_e -= zeros
            int_mant = (int_mant << zeros) & mask
    o_p1, overflow = mant_rne(int_mant, width, m + 1)
    if overflow:
        if o_e < expo_max - 1:
            o_e += 1
        else:
            is_inf = True
    out = _inf(o_s, fmt) if is_inf else join(o_s, o_e, o_p1, fmt)
    if is_nan(a_e, a_m, fmt):
        return a
    if is_nan(b_e, b_m, fmt):
        return b
    return out


def fp_sub(a: int, b: int, fmt: tuple[int, int]) -> int:
    """``FpSub``: ``FpAdd(a, b with its sign bit flipped)``."""
    return fp_add(a, b ^ (1 << sum(fmt)), fmt)


def fp_mul(a: int, b: int, fmt: tuple[int, int]) -> int:
    """``FpMul<E, M>``: the exact ``(2M+2)``-bit product, normalized, then ``FpMantWidthDec``'s
    round half to even; results with a zero exponent are zero, overflow is the largest value."""
    e, m = fmt
    bias, expo_max = (1 << e) // 2 - 1, (1 << e) - 1
    a_s, a_e, a_m = split(a, fmt)
    b_s, b_e, b_m = split(b, fmt)
    a_zero, b_zero = a_e == 0 and a_m == 0, b_e == 0 and b_m == 0
    product = (a_m | ((not a_zero) << m)) * (b_m | ((not b_zero) << m))
    p_width = 2 * m + 1
    sign = a_s ^ b_s
    is_inf = is_zero = False
    p_e = p_m = 0
    if a_zero or b_zero or a_e + b_e < bias:
        is_zero = True
    elif a_e + b_e >= expo_max + bias:
        is_inf = True
    else:
        p_e = a_e + b_e - bias
        if product >> p_width:
            if p_e < expo_max - 1:
                p_e += 1
                p_m = product & ((1 << p_width) - 1)
            else:
                is_inf = True
        else:
            p_m = (product << 1) & ((1 << p_width) - 1)
    o_m, overflow = mant_rne(p_m | (1 << p_width), p_width + 1, m + 1)
    o_e = p_e & expo_max
    if overflow:
        o_e = (o_e + 1) & expo_max
        if o_e == expo_max:
            is_inf = True
    out = join(sign, o_e, o_m, fmt)
    if is_inf:
        out = _inf(sign, fmt)
    if is_zero or split(out, fmt)[1] == 0:
        out = join(sign, 0, 0, fmt)
    if is_nan(a_e, a_m, fmt):
        return a
    if is_nan(b_e, b_m, fmt):
        return b
    return out


def fp_cmp(a: int, b: int, fmt: tuple[int, int], *, maximum: bool) -> int:
    """``FpCmp`` (``FpMax``/``FpMin``): sign, then exponent and mantissa; -0 < +0; the first
    NaN operand wins."""
    a_s, a_e, a_m = split(a, fmt)
    b_s, b_e, b_m = split(b, fmt)
    abs_greater = a_e > b_e or (a_e == b_e and a_m > b_m)
    if a_s == 0:
        a_greater = abs_greater if b_s == 0 else True
    else:
        a_greater = False if b_s == 0 else not abs_greater
    out = (a if a_greater else b) if maximum else (b if a_greater else a)
    if is_nan(a_e, a_m, fmt):
        return a
    if is_nan(b_e, b_m, fmt):
        return b
    return out


def fp_relu(a: int, fmt: tuple[int, int]) -> int:
    """``FpRelu``: a set sign bit gives +0, except for NaN, which passes."""
    s, e, m = split(a, fmt)
    return a if (is_nan(e, m, fmt) or s == 0) else 0


def width_inc(bits: int, src: tuple[int, int], dst: tuple[int, int], *, denorm: bool) -> int:
    """``FpWidthInc``: widen the mantissa (a NaN keeps its payload in the low bits), then the
    exponent; Inf becomes the largest finite value, a source denormal is normalized
    (``denorm``) or read with a hidden 1."""
    (ie, im), (oe, om) = src, dst
    s, e, mnt = split(bits, src)
    wide = mnt if is_nan(e, mnt, src) else mnt << (om - im)
    if ie == oe:
        return join(s, e, wide, dst)
    delta = ((1 << oe) // 2 - 1) - ((1 << ie) // 2 - 1)
    o_e, o_m = (0, wide) if (e == 0 and wide == 0) else (e + delta, wide)
    if denorm and e == 0 and wide != 0:
        zeros = leading_zeros(wide, om)
        o_e = delta - zeros
        o_m = (wide << (zeros + 1)) & ((1 << om) - 1)
    if e == (1 << ie) - 1 and wide == 0:
        return _inf(s, dst)
    if e == (1 << ie) - 1 and mnt != 0:
        return join(s, (1 << oe) - 1, wide, dst)
    return join(s, o_e, o_m, dst)


def _mant_dec_shift_right(mant: int, shift: int, in_width: int, out_width: int):
    """``FpMantDecShiftRight``: the implied 1 added, shifted right, rounded half to even."""
    delta = in_width - out_width
    p1_width = in_width + 1
    p1 = mant | (1 << in_width)
    mask = (1 << p1_width) - 1

    def bit(pos):  # a mask of 1 << pos in the (in_width + 1)-bit type
        return (1 << pos) & mask if pos >= 0 else 0

    guard = (p1 & bit(delta + shift - 1)) != 0
    sticky = (p1 & ((bit(delta + shift - 1) - 1) & mask)) != 0
    least = (p1 & bit(delta + shift)) != 0
    carry = guard and (sticky or least)
    top = ((p1 >> shift) >> delta) & ((1 << (out_width + 1)) - 1)
    total = (top + carry) & ((1 << (out_width + 1)) - 1)
    return total & ((1 << out_width) - 1), bool(total >> out_width)


def width_dec(bits: int, src: tuple[int, int], dst: tuple[int, int], *, denorm: bool) -> int:
    """``FpWidthDec``: round half to even to the narrower format, saturating to its largest
    value; results in its denormal range are denormals (``denorm``) or zero, below it zero; a
    NaN keeps its low mantissa bits."""
    (ie, im), (oe, om) = src, dst
    o_max = (1 << oe) - 1
    delta = ((1 << ie) // 2 - 1) - ((1 << oe) // 2 - 1)
    s, e, mnt = split(bits, src)
    out = None
    if e >= o_max + delta:
        out = _inf(s, dst)
    elif e < delta - om:
        out = join(s, 0, 0, dst)
    elif e <= delta:
        o_m, overflow = _mant_dec_shift_right(mnt, delta - e + 1, im, om)
        if overflow:
            out = join(s, 1, o_m, dst)
        else:
            out = join(s, 0, o_m, dst) if denorm else join(s, 0, 0, dst)
    else:
        o_e = e - delta
        o_p1, overflow = mant_rne(mnt | (1 << im), im + 1, om + 1)
        if overflow:
            o_e += 1
        out = _inf(s, dst) if (overflow and o_e == o_max) else join(s, o_e, o_p1, dst)
    if is_nan(e, mnt, src):
        return join(s, o_max, mnt, dst)
    return out


def expo_width_dec(bits: int, src: tuple[int, int], dst: tuple[int, int]) -> int:
    """``FpExpoWidthDec`` (same mantissa width): the largest value above the range, zero below
    the denormals, denormals by ``FpMantDecShiftRight`` (round half to even), a NaN's mantissa
    kept."""
    (ie, m), (oe, _) = src, dst
    o_max = (1 << oe) - 1
    delta = ((1 << ie) // 2 - 1) - ((1 << oe) // 2 - 1)
    s, e, mnt = split(bits, src)
    if is_nan(e, mnt, src):
        return join(s, o_max, mnt, dst)
    if e >= o_max + delta:
        return _inf(s, dst)
    if e < delta - m:
        return join(s, 0, 0, dst)
    if e <= delta:
        o_m, overflow = _mant_dec_shift_right(mnt, delta - e + 1, m, m)
        return join(s, 1 if overflow else 0, o_m, dst)
    return join(s, e - delta, mnt, dst)


def fp17_to_fp16(x: int) -> int:
    """``Fp17ToFp16``."""
    return expo_width_dec(x, FP17, FP16)


def fp16_to_fp32(h: int) -> int:
    """``Fp16ToFp32``."""
    return width_inc(h, FP16, FP32, denorm=True)


def fp16_to_fp17(h: int) -> int:
    """``Fp16ToFp17``."""
    return width_inc(h, FP16, FP17, denorm=True)


def fp17_to_fp32(x: int) -> int:
    """``Fp17ToFp32``."""
    return width_inc(x, FP17, FP32, denorm=False)


def fp32_to_fp16(f: int) -> int:
    """``Fp32ToFp16``."""
    return width_dec(f, FP32, FP16, denorm=True)


def fp32_to_fp17(f: int) -> int:
    """``Fp32ToFp17``."""
    return width_dec(f, FP32, FP17, denorm=False)


def fp16_to_int16(h: int) -> int:
    """``Fp16ToInt16`` (``FpFloatToInt<16, 5, 10>``): ``1.m x 2^(e-15)`` (a hidden 1 always),
    rounded half away from zero, saturated; NaN is -32768."""
    s, e, mnt = split(h, FP16)
    if is_nan(e, mnt, FP16):
        return -32768
    p1 = mnt | (1 << 10)
    shift = 10 - (e - 15)
    # AC_RND_INF (half away from zero) on a positive value
    magnitude = p1 << -shift if shift <= 0 else (p1 + (1 << (shift - 1))) >> shift
    if magnitude > 32767:
        return -32768 if s else 32767
    return -magnitude if s else magnitude


def int17_to_fp16(v: int) -> int:
    """``Int17ToFp16`` (``FpIntToFloat<17, 5, 10>``): round half to even, saturating to 65504."""
    if v == 0:
        return 0
    s = 1 if v < 0 else 0
    mag = (-v if s else v) & ((1 << 17) - 1)
    zeros = leading_zeros(mag, 17)
    o_e = (17 - 1 - zeros + 15) & 31
    o_p1, overflow = mant_rne((mag << zeros) & ((1 << 17) - 1), 17, 11)
    if o_e == 31 or (overflow and o_e >= 30):
        return _inf(s, FP16)
    if overflow:
        o_e += 1
    return join(s, o_e, o_p1, FP16)


LUT_INDEX_SELECT_BITS = 8  # yLutRegIdxSize: the signed shift register
LUT_ADDR_BITS = 9  # yLutAddrSize
LUT_FRAC_BITS = 35  # yLutFracSize


def fp32_to_int_frac(f: int, rshift: int) -> tuple[int, int]:
    """``FpFloatToIntFrac<8, 23, 8, 9, 35>``: ``f x 2^-rshift`` split into an integer index
    (saturated to 511) and 35 fraction bits; the hidden bit is always 1 and the unbiased
    exponent is held in 8 signed bits (255 wraps to -128); NaN gives (0, 0)."""
    _, e, mnt = split(f, FP32)
    if is_nan(e, mnt, FP32):
        return 0, 0
    p1 = mnt | (1 << 23)
    abs_expo = ((e - 127 + 128) & 0xFF) - 128
    lshift = abs_expo - rshift - 23
    if lshift >= 0:
        return (1 << LUT_ADDR_BITS) - 1, 0
    integer = p1 >> -lshift
    frac_shift = LUT_FRAC_BITS + lshift
    frac = (p1 << frac_shift) if frac_shift >= 0 else (p1 >> -frac_shift)
    return min(integer, (1 << LUT_ADDR_BITS) - 1), frac & ((1 << LUT_FRAC_BITS) - 1)


def fraction_to_fp17(frac: int, width: int = LUT_FRAC_BITS) -> int:
    """``FpFractionToFloat<width, 6, 10>``: a ``width``-bit fraction (``0.f``) as fp17, round
    half to even; 0 gives +0 (the SDP's LUT: 35 bits; the CDP's: 16)."""
    bias = 31
    if frac == 0:
        return 0
    zeros = leading_zeros(frac, width)
    shifted = (frac << (zeros + 1)) & ((1 << (width + 1)) - 1)
    o_p1, overflow = mant_rne(shifted, width + 1, 11)
    if overflow:
        return join(0, bias - zeros, o_p1 >> 1, FP17)
    if bias <= zeros + 1:
        return 0
    return join(0, bias - zeros - 1, o_p1, FP17)
