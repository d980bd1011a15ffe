"""Scalar Python-int twins of :mod:`quantemu.backends.xs3.xformer.runtime`: the specification.

Each function follows lib_nn's ``vpu_sim.c`` lane by lane on plain ints (S16 mode, XS3A).
"""

from __future__ import annotations

import math
import struct


def sat_sym(v: int, bits: int) -> int:
    """``vpu_saturate``: clamp to ``[-(2**(bits-1) - 1), 2**(bits-1) - 1]``.

    >>> [sat_sym(v, 16) for v in (-40000, -32768, 0, 40000)]
    [-32767, -32767, 0, 32767]
    """
    hi = (1 << (bits - 1)) - 1
    return max(-hi, min(hi, v))


def vlsat(acc: int, s: int) -> int:
    """``SAT16((acc + 2**(s-1)) >> s)`` (``s > 0``), ``SAT16(acc)`` (``s == 0``)."""
    return sat_sym((acc + (1 << (s - 1))) >> s if s > 0 else acc, 16)


def vlashr(t: int, s: int, *, truncate: bool = False) -> int:
    """``VLASHR`` (S16): sign for ``s >= 15``; rounding (or, ``truncate``, floor) right shift
    for ``0 < s < 15``; 32-bit wrapping left shift for ``s <= 0``; then ``SAT16``."""
    if s >= 15:
        v = -1 if t < 0 else 0
    elif s > 0:
        v = t >> s if truncate else (t + (1 << (s - 1))) >> s
    else:
        v = ((t << -s) + (1 << 31)) % (1 << 32) - (1 << 31)
    return sat_sym(v, 16)


def vlmul(t: int, m: int) -> int:
    """``SAT16((t * m + 2**13) >> 14)``."""
    return sat_sym((t * m + (1 << 13)) >> 14, 16)


def vladd(t: int, b: int) -> int:
    """``SAT16(t + b)``."""
    return sat_sym(t + b, 16)


def vdepth8_fixed(t: int) -> int:
    """``clamp((t + 128) >> 8, -128, 127)``."""
    return max(-128, min(127, (t + 128) >> 8))


def ot_group(acc: int, mul: int, bias: int, initial_shr: int, final_shr: int, *, truncate=False):
    """One lane of the group OT (``output_transform_fn_impl``)."""
    acc = sat_sym(acc, 32)
    t = vlsat(acc, initial_shr) if initial_shr > 0 else vlashr(vlsat(acc, 0), initial_shr)
    t = vladd(vlmul(t, mul), bias)
    return vdepth8_fixed(vlashr(t, final_shr, truncate=truncate))


def ot_channelwise(acc: int, shift: int, mul: int, bias: int, final_shr: int, *, truncate=False):
    """One lane of the channelwise OT (``output_transform_fn_int_channelwise_impl``)."""
    t = vladd(vlmul(vlsat(sat_sym(acc, 32), shift), mul), bias)
    return vdepth8_fixed(vlashr(t, final_shr, truncate=truncate))


# ---------------------------------------------------------------- XC_add, XC_lookup, XC_mean


def _f32(v: float) -> float:
    """Round a double to the nearest float32 (ties to even), as a C ``float`` store does."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def add_elementwise(  # noqa: PLR0917 -- the operands, then the kernel's parameters
    x1: int, x2: int, m1: int, m2: int, bias: int, shift: int
) -> int:
    """One lane of ``add_elementwise_ref``'s vector body: the bias in the 32-bit accumulator,
    two saturating VLMACCs (``x * m``), then VLSAT_FIXED (``(acc + 2**(shift-1)) >> shift``
    in int32, clamped to ``[-128, 127]``)."""
    acc = sat_sym(bias + x1 * m1, 32)
    acc = sat_sym(acc + x2 * m2, 32)
    if shift:
        acc = ((acc + (1 << (shift - 1)) + (1 << 31)) % (1 << 32) - (1 << 31)) >> shift
    return max(-128, min(127, acc))


def lookup8(x: int, table) -> int:
    """``lookup8_ref``: the entry at the code's uint8 bit pattern."""
    return int(table[x & 0xFF])


def mean_int8(values, scale_mul: float, in_zero_point: float, out_zero_point: float) -> int:
    """``mean_int8`` for one output: the codes ``values`` reduced, float32 steps as the C."""
    n = len(values)
    acc = int(_f32(-in_zero_point * _f32(float(n)))) + sum(int(v) for v in values)
    q = _f32(_f32(_f32(float(acc)) * scale_mul) + out_zero_point)
    q = min(max(q, -128.0), 127.0)
    t = float(int(q))  # C roundf: ties away from zero
    if q - t >= 0.5:
        t += 1.0
    elif q - t <= -0.5:
        t -= 1.0
    return int(t)


# ---------------------------------------------------------------- XC_mul


def mul_elementwise(x1: int, x2: int, params: tuple[int, int, int, int, int]) -> int:
    """One lane of lib_nn's ``mul_elementwise_ref`` (the host build), written as the C is:
    ``params`` = ``(in1_offset, in2_offset, bias, scalar, vlashr_shr)``, the offsets being
    ``-zero_point - 1``; the eight-term sum, VLSAT by 1, unclamped VLMUL, clamped VLADD,
    VLASHR (floor right, int32-wrapping left), VDEPTH8."""
    o1, o2, bias, scalar, shr = params
    acc = o2 * x1 + o1 * x2 + x1 * x2 + o1 * o2 + x1 + x2 + o1 + o2
    t = (acc + 1) >> 1
    m = (scalar * t + (1 << 13)) >> 14
    a = max(-32767, min(32767, m + bias))
    if shr > 0:
        a >>= shr
    else:
        a = ((a << -shr) + (1 << 31)) % (1 << 32) - (1 << 31)
    a = max(-32767, min(32767, a))
    return max(-128, min(127, (a + 128) >> 8))


# ---------------------------------------------------------------- XC_softmax


def _f32_or_inf(v: float) -> float:
    """``_f32`` where a value beyond float32's range becomes inf (a float32 op overflowing).

    Rounding a double result to float32 equals the float32 operation itself for ``+ * /``
    (53 >= 2 * 24 + 2 bits: double rounding is innocuous).
    """
    if math.isnan(v) or math.isinf(v):
        return v
    try:
        return _f32(v)
    except OverflowError:
        return math.copysign(math.inf, v)


def xc_softmax_row(codes, table) -> list[int]:
    """lib_nn ``softmax_single`` on one row of int8 ``codes`` with the float32 exp ``table``,
    clamped as the 1.4.2 host build does (127 above, -128 below, NaN -> 0)."""
    values = [float(table[int(c) + 128]) for c in codes]
    total = 0.0
    for v in values:  # float32 adds, left to right
        total = _f32_or_inf(total + v)
    inv = _f32_or_inf(1.0 / total) if total else math.inf
    inv = _f32_or_inf(inv * 256.0)
    out = []
    for v in values:
        p = _f32_or_inf(v * inv)  # 0 * inf is NaN
        if math.isnan(p):
            out.append(0)
        elif math.isinf(p):
            out.append(127)
        else:
            r = math.floor(p + 0.5)  # C roundf on p >= 0: ties away from zero
            out.append(max(-128, min(127, r - 128)))
    return out
