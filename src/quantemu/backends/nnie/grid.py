"""Exact arithmetic on NNIE's logarithmic grid, from integers only.

NNIE's 8-bit code of a value ``x`` depends on where ``|x|`` sits among the points ``2^(h/32)``:
the rounding boundaries ``2^((z+j+1/2)/16)`` are the odd ``h`` and the thresholds ``P`` and ``N``
(``nnie.md`` §1) are even ``h``. This module locates every float32 on that half-step grid
*exactly*, with no ``log2`` and no libm:

- ``2^(r/32)`` for ``r = 0..31`` is known to 128 fractional bits by an integer 32nd root
  (:func:`_pow2_fraction_fixed`), so every comparison of a float32 (24-bit mantissa) or float64
  (53-bit) with a grid point, and every rounding of a grid point to float32/float64, is decided by
  integer arithmetic. ``2^(r/32)`` is irrational for ``r != 0``, so no float equals it; the module
  checks at import that 128 bits leave no rounding undecided.
- :func:`first_float32_at_least` gives, for grid points ``2^(h/32)``, the bit pattern of the first
  float32 ``>=`` (or ``>``) the point. Positive float32 bit patterns are ordered like their values,
  so ``|x| >= 2^(h/32)`` becomes an integer comparison of bit patterns.
- The *grid key* of a float32 numbers the interval between consecutive distinct thresholds that
  holds it. Every decision of ``nnie.md`` §3 is a function of the key: within one key, the sign,
  ``F = floor(32*log2|x|)`` and whether ``|x|`` is exactly ``2^(F/32)`` are constant.
- :func:`float32_levels` and :func:`float64_pow2_16th` round ``2^(n/16)`` to float32 / float64
  correctly (nearest, ties to even; float32 subnormals kept, overflow to inf).

Everything here is computed once at import (tables of a few hundred KiB) or per clip value
(tables of 256 entries).
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# 2^(r/32) to 128 fractional bits.

_FIX = 128  # fractional bits of the fixed-point constants


def _pow2_fraction_fixed(num: int, den: int, bits: int) -> int:
    """``floor(2^(num/den) * 2^bits)`` exactly, for ``0 <= num < den``.

    It is the integer ``den``-th root of ``2^(num + bits*den)``, found by bisection on exact
    Python integers (the result lies in ``[2^bits, 2^(bits+1))``).
    """
    target = 1 << (num + bits * den)
    lo, hi = 1 << bits, 1 << (bits + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid**den <= target:
            lo = mid
        else:
            hi = mid
    return lo


# _G32[r] = floor(2^(r/32) * 2^128); exact (no fractional part) only for r = 0.
_G32 = tuple(_pow2_fraction_fixed(r, 32, _FIX) for r in range(32))


def _round_fixed(g: int, exact: bool, shift: int) -> int:
    """Nearest integer to ``2^-shift * v``, where ``v = g / 2^128`` exactly or ``g <= v*2^128 <
    g+1`` (``exact`` False: ``v`` irrational). Ties (only possible when exact) go to even.
    """
    if shift <= 0:
        return g << -shift
    if exact:
        q, rem = divmod(g, 1 << shift)
        half = 1 << (shift - 1)
        return q + (rem > half or (rem == half and q & 1))
    # v is irrational, so it is never at a tie; but the unknown bits below g could carry it across
    # one. That happens only if g + 2^(shift-1) + 1 is a multiple of 2^shift, which we rule out.
    if shift > 1 and (g + (1 << (shift - 1)) + 1) % (1 << shift) == 0:  # pragma: no cover
        raise ArithmeticError("128 fractional bits do not decide this rounding")
    return (g + (1 << (shift - 1))) >> shift


# ---------------------------------------------------------------------------------------------
# Thresholds: the first float32 at or above a grid point.

F32_INF_BITS = 0x7F800000
_MANT = 1 << 23  # the implicit leading one of a float32 mantissa

# Smallest 24-bit mantissa integer m with m / 2^23 >= 2^(r/32) (for r != 0 the point is
# irrational, so >= and > agree): floor(2^23 * 2^(r/32)) + 1.
_M_AT_LEAST = np.array([_MANT] + [(g >> (_FIX - 23)) + 1 for g in _G32[1:]], dtype=np.int64)


def first_float32_at_least(h: np.ndarray, *, strict: bool = False) -> np.ndarray:
    """Bit pattern of the first float32 ``t`` with ``t >= 2^(h/32)`` (``t > 2^(h/32)`` if strict).

    ``h`` is an integer array. Results are int64 bit patterns of non-negative float32 values:
    at least 1 (the smallest subnormal, for every point below it) and at most ``0x7F800000``
    (+inf, for every point above ``FLT_MAX``). For a non-negative float32 ``x`` with bit pattern
    ``a``: ``x >= 2^(h/32)`` (resp. ``>``) if and only if ``a >= result``.

    Normal range: ``2^(h/32) = 2^q * 2^(r/32)``; the answer has exponent ``q`` and the mantissa
    ``_M_AT_LEAST[r]``. Subnormal range (``q < -126``): the answer is the smallest integer
    ``m > 2^(23-s) * 2^(r/32)`` times ``2^-149`` with ``s = -126 - q``, that is
    ``((M - 1) >> s) + 1`` (floor of a floor is the floor of the quotient).

    >>> [hex(t) for t in first_float32_at_least(np.array([0, 1, 32 * -149, 32 * 128]))]
    ['0x3f800000', '0x3f82cd87', '0x1', '0x7f800000']
    >>> hex(first_float32_at_least(np.array([0]), strict=True)[0])
    '0x3f800001'
    """
    h = np.asarray(h, dtype=np.int64)
    q, r = h >> 5, h & 31
    m = _M_AT_LEAST[r] + ((r == 0) & strict)
    normal = ((q + 127) << 23) + m - _MANT
    shift = np.minimum(np.maximum(-126 - q, 0), 40)
    subnormal = ((m - 1) >> shift) + 1
    out = np.where(q < -126, subnormal, normal)
    return np.where(q >= 128, F32_INF_BITS, out)


# ---------------------------------------------------------------------------------------------
# Correctly rounded levels.


def _level_mantissas() -> tuple[np.ndarray, np.ndarray]:
    """Per ``r = 0..15``: the 24-bit mantissa of f32(2^(r/16)) and, for ``q = -150..-127``, the
    subnormal multiple of ``2^-149`` nearest to ``2^q * 2^(r/16)``."""
    normal = np.zeros(16, dtype=np.int64)
    sub = np.zeros((16, 24), dtype=np.int64)
    for r in range(16):
        g, exact = _G32[2 * r], r == 0
        normal[r] = _round_fixed(g, exact, _FIX - 23)
        for j, q in enumerate(range(-150, -126)):
            # value / 2^-149 = 2^(q + 149) * v = g * 2^(q + 149 - 128)
            sub[r, j] = _round_fixed(g, exact, _FIX - (q + 149))
    return normal, sub


_LEVEL_NORMAL, _LEVEL_SUB = _level_mantissas()


def float32_levels(n: np.ndarray) -> np.ndarray:
    """``f32(2^(n/16))`` for an integer array ``n``: the float32 nearest to the exact value.

    Ties to even (only ``2^-150`` is a tie; it rounds to 0), subnormals kept, values beyond the
    float32 range become +inf and values below half the smallest subnormal become +0.

    >>> float32_levels(np.array([0, 16, -16 * 150, -16 * 149, 16 * 128, 2047])).tolist()
    [1.0, 2.0, 0.0, 1.401298464324817e-45, inf, 3.2585550925227063e+38]
    """
    n = np.asarray(n, dtype=np.int64)
    q, r = n >> 4, n & 15
    normal = np.ldexp(_LEVEL_NORMAL[r].astype(np.float64), np.clip(q, -126, 127) - 23)
    sub_index = np.clip(q + 150, 0, 23)
    subnormal = np.ldexp(_LEVEL_SUB[r, sub_index].astype(np.float64), -149)
    value = np.where(q < -126, np.where(q < -150, 0.0, subnormal), normal)
    value = np.where(q >= 128, np.inf, value)
    # Every finite value above is a float32 exactly, so this cast does not round.
    return value.astype(np.float32)


# float64: 53-bit mantissas of 2^(r/16); only the normal float64 range is needed (|q| <= 1022).
_F64_MANT = np.array(
    [_round_fixed(_G32[2 * r], r == 0, _FIX - 52) for r in range(16)], dtype=np.int64
)
F64_POW2_16TH_MIN = -1022 * 16  # 2^(k/16) is a normal float64 for k in [min, max]
F64_POW2_16TH_MAX = 1024 * 16 - 1


def float64_pow2_16th(k: np.ndarray) -> np.ndarray:
    """The float64 nearest to ``2^(k/16)`` for an integer array ``k`` (ties impossible), with
    every ``k`` in ``[F64_POW2_16TH_MIN, F64_POW2_16TH_MAX]`` (the normal float64 range).

    >>> float64_pow2_16th(np.array([16, 15, -16])).tolist()
    [2.0, 1.9152065613971474, 0.5]
    """
    k = np.asarray(k, dtype=np.int64)
    if k.size and (k.min() < F64_POW2_16TH_MIN or k.max() > F64_POW2_16TH_MAX):
        raise ValueError(f"k outside [{F64_POW2_16TH_MIN}, {F64_POW2_16TH_MAX}]")
    # The mantissas are below 2^53, so the conversion to float64 and ldexp are exact.
    return np.ldexp(_F64_MANT[k & 15].astype(np.float64), (k >> 4) - 52)


# ---------------------------------------------------------------------------------------------
# Grid keys.

_H_LOW = -149 * 32  # the smallest subnormal is exactly 2^(_H_LOW/32)
_H_HIGH = 128 * 32 - 1  # floor(32*log2(FLT_MAX))
# F of +-inf: larger than any threshold could ask for (|z| <= 17312 for any finite float64 clip).
F_INF = 1 << 30


def _thresholds() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted distinct thresholds (bit patterns) and, for the interval each one starts, the
    ``F = floor(32*log2|x|)`` and whether ``|x| = 2^(F/32)`` exactly.

    Grid points 2^(h/32) with h a multiple of 32 are powers of two: the float32 equal to one is a
    one-value interval of its own (exact), and the next float32 starts a non-exact interval. Below
    2^-148 several grid points share a threshold; the interval then takes the largest ``F``.
    """
    h = np.arange(_H_LOW, _H_HIGH + 1, dtype=np.int64)
    powers = h[h % 32 == 0]
    t = np.concatenate(
        [
            first_float32_at_least(h),
            first_float32_at_least(powers, strict=True),
            [F32_INF_BITS],
        ]
    )
    f = np.concatenate([h, powers, [F_INF]])
    exact = np.concatenate([h % 32 == 0, np.zeros(len(powers) + 1, dtype=bool)])
    order = np.lexsort((f, t))
    t, f, exact = t[order], f[order], exact[order]
    last = np.append(t[1:] != t[:-1], True)  # keep the largest F of each threshold
    return t[last], f[last], exact[last]


THRESHOLDS, KEY_F, KEY_EXACT = _thresholds()
N_MAG = len(THRESHOLDS)  # nonzero magnitude intervals per sign
KEY_ZERO = 2 * N_MAG  # +0 and -0
KEY_FLAG = 2 * N_MAG + 1  # "look again": subnormals in crowded buckets, inf, NaN
N_KEYS = 2 * N_MAG + 2
_BUCKET_SHIFT = 15  # buckets of 2^15 bit patterns: 1 sign + 8 exponent + 8 mantissa bits
_OFFSET_MASK = (1 << _BUCKET_SHIFT) - 1
_NEVER = 1 << _BUCKET_SHIFT  # an in-bucket threshold no offset reaches
if N_KEYS >= 1 << 15:  # pragma: no cover  (about 18000 keys; the packing below needs < 2^15)
    raise AssertionError("too many grid keys for the packed bucket table")


def _bucket_table() -> np.ndarray:
    """Per bucket of bit patterns, one packed uint32: ``(base << 16) + (2^16 - t)``.

    ``base`` is the key at the bucket's start and ``t`` (1..2^15) the offset of the one threshold
    inside the bucket (``2^15``: none). For an offset ``o`` in ``0..2^15-1``,
    ``(entry + o) >> 16`` is ``base + (o >= t)``: the low half ``2^16 - t + o`` lies in
    ``[2^15, 3*2^15)`` and reaches ``2^16`` exactly when ``o >= t``. Keys are below ``2^15``,
    so the sum fits 32 bits. The stored entry has the bucket's first bit pattern subtracted
    (mod 2^32), so that the caller adds the bit pattern itself.

    Key of a magnitude key ``km >= 1`` (``km`` = number of thresholds ``<= |x|``) with sign ``s``
    is ``s*N_MAG + km - 1``. Within a normal-float32 bucket (relative width ``2^-8``) lies at most
    one threshold, since consecutive thresholds differ by a factor of at least ``2^(1/32)``.
    Crowded subnormal buckets and the inf/NaN buckets get base ``KEY_FLAG`` (exact
    ``searchsorted`` later); bucket 0 separates zero (``KEY_ZERO``) from the subnormals after it
    (``KEY_ZERO + 1 == KEY_FLAG``).
    """
    start = np.arange(1 << 16, dtype=np.int64) << _BUCKET_SHIFT
    km = np.searchsorted(THRESHOLDS, start, side="right")
    inside = np.searchsorted(THRESHOLDS, start + _OFFSET_MASK, side="right") - km
    crowded = (inside > 1) | (start >= F32_INF_BITS)
    if np.any(crowded[(start >= _MANT) & (start < F32_INF_BITS)]):  # pragma: no cover
        raise AssertionError("a normal float32 bucket holds two grid thresholds")
    offset = np.where(inside == 1, THRESHOLDS[np.minimum(km, N_MAG - 1)] - start, _NEVER)
    offset = np.where(crowded, _NEVER, offset)
    offset[0] = 1  # bucket 0: zero, then subnormals from bit pattern 1 on
    table = np.empty(1 << 17, np.int64)
    for sign in (0, 1):
        base = np.where(crowded, KEY_FLAG, sign * N_MAG + km - 1)
        base[0] = KEY_ZERO
        table[sign << 16 : (sign + 1) << 16] = (base << 16) + ((1 << 16) - offset)
    # Pre-subtract each bucket's first bit pattern (mod 2^32), so that adding the whole bit
    # pattern, rather than its in-bucket offset, gives the same sum: saves a masking pass.
    buckets = np.arange(1 << 17, dtype=np.int64) << _BUCKET_SHIFT
    table = ((table - buckets) & 0xFFFFFFFF).astype(np.uint32)
    table.flags.writeable = False
    return table


_BUCKET_TABLE = _bucket_table()


def grid_keys(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid keys (intp, ready to index tables) of float32 bit patterns (a flat, contiguous
    uint32 array), and the flat indices of the NaNs among them (an empty array normally; their
    keys are ``KEY_ZERO``, and callers reject them).

    Every element costs one table gather and three cheap integer passes; only elements in flagged
    buckets (subnormals below ``2^-134``, infinities, NaNs) take an exact ``searchsorted``
    afterwards, and only when there is one. Indices are intp because NumPy gathers fastest
    with them (other index dtypes are converted first).
    """
    keys = np.right_shift(bits, _BUCKET_SHIFT, dtype=np.intp)  # the bucket, then the key
    # Every bucket index is in range (a uint32 >> 15 < 2^17): mode="wrap" never wraps, and it
    # skips the bounds-check error path that makes the default "raise" slower.
    entry = np.take(_BUCKET_TABLE, keys, mode="wrap")
    entry += bits  # wraps mod 2^32 to (packed entry + in-bucket offset), see _bucket_table
    np.right_shift(entry, 16, out=keys)
    if not entry.size or entry.max() < (KEY_FLAG << 16):
        return keys, np.empty(0, dtype=np.intp)
    where = np.flatnonzero(keys >= KEY_FLAG)
    b = bits[where]
    mag = (b & 0x7FFFFFFF).astype(np.int64)
    km = np.searchsorted(THRESHOLDS, mag, side="right")
    nan = mag > F32_INF_BITS
    keys[where] = np.where(nan, KEY_ZERO, (b >> 31).astype(np.int64) * N_MAG + km - 1)
    return keys, where[nan]


def key_fields() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key below ``KEY_ZERO``: sign (0/1), ``F`` (int64) and exactness, as read-only arrays."""
    sign = np.repeat(np.array([0, 1], dtype=np.int64), N_MAG)
    return sign, np.tile(KEY_F, 2), np.tile(KEY_EXACT, 2)
