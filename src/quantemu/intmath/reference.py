"""The specification: every :mod:`quantemu.intmath` primitive on plain Python ints.

These functions are deliberately naive (scalar, sequential, straight from the formula on ℤ).
They are the contracts the vectorised primitives are tested against with ``==`` (DESIGN
principle 2). Do not optimise them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath.policies import Bounds, Granularity, NanPolicy, NegativeShift

# --- saturation bounds (used by several references below) -------------------------------------


def _bounds(bits: int, bounds: Bounds) -> tuple[int, int]:
    hi = 2 ** (bits - 1) - 1
    lo = -hi if bounds is Bounds.SYMMETRIC else -(2 ** (bits - 1))
    return lo, hi


def _wrap(v: int, bits: int) -> int:
    return ((v + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1)


# --- saturating accumulation ------------------------------------------------------------------


def accumulate(
    products: Sequence[int],
    *,
    bits: int,
    granularity: Granularity,
    chunk: int | None = None,
    init: int = 0,
    bounds: Bounds = Bounds.TWOS_COMPLEMENT,
) -> tuple[int, bool]:
    """Add ``products`` in order to ``init``; return ``(acc, saturated)``.

    The accumulator starts at ``init`` as given: it is not clamped on load, only after each
    step (``AT_END``: once, even when there are no products). ``saturated`` is true when any
    clamp changed the running value.
    """
    lo, hi = _bounds(bits, bounds)
    if granularity is Granularity.WRAP:
        return _wrap(init + sum(products), bits), False
    if granularity is Granularity.AT_END:
        total = init + sum(products)
        clamped = min(max(total, lo), hi)
        return clamped, clamped != total
    step = 1 if granularity is Granularity.PER_PRODUCT else chunk
    acc, saturated = init, False
    for start in range(0, len(products), step):
        total = acc + sum(products[start : start + step])
        acc = min(max(total, lo), hi)
        saturated = saturated or acc != total
    return acc, saturated


# --- rounding right shifts ---------------------------------------------------------------------


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _shift(x: int, shift: int, rounded, negative: NegativeShift, bits: int | None) -> int:
    """``rounded(x, shift)`` for ``shift >= 0``; a negative shift follows ``negative``."""
    if shift >= 0:
        return x if shift == 0 else rounded(x, shift)
    if negative is NegativeShift.ERROR:
        raise InvalidInputError(f"negative shift {shift} with NegativeShift.ERROR")
    if negative is NegativeShift.LEFT:
        return x * 2**-shift
    lo, hi = _bounds(bits, Bounds.TWOS_COMPLEMENT)
    return min(max(x * 2**-shift, lo), hi)


def shift_right_round_half_up(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``floor((x + 2**(s-1)) / 2**s)``: ties toward +inf (XS3 RSHR)."""
    return _shift(x, shift, lambda v, s: (v + 2 ** (s - 1)) // 2**s, negative, bits)


def shift_right_round_half_down(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``-floor((-x + 2**(s-1)) / 2**s)``: ties toward -inf."""
    return _shift(x, shift, lambda v, s: -((-v + 2 ** (s - 1)) // 2**s), negative, bits)


def shift_right_round_half_away(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``sign(x) * ((|x| + 2**(s-1)) >> s)``: ties away from zero (NVDLA rhaz)."""
    return _shift(
        x, shift, lambda v, s: _sign(v) * ((abs(v) + 2 ** (s - 1)) // 2**s), negative, bits
    )


def _half_even(v: int, s: int) -> int:
    q, r = divmod(v, 2**s)  # floor quotient, 0 <= r < 2**s
    if 2 * r > 2**s or (2 * r == 2**s and q % 2 == 1):
        q += 1
    return q


def shift_right_round_half_even(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """Nearest integer to ``x / 2**s``, ties to the even one."""
    return _shift(x, shift, _half_even, negative, bits)


def shift_right_floor(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``floor(x / 2**s)``."""
    return _shift(x, shift, lambda v, s: v // 2**s, negative, bits)


def shift_right_toward_zero(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``sign(x) * floor(|x| / 2**s)`` (C integer division)."""
    return _shift(x, shift, lambda v, s: _sign(v) * (abs(v) // 2**s), negative, bits)


def shift_left_saturate(x, shift, bits):
    """``clamp(x * 2**shift, -2**(bits-1), 2**(bits-1) - 1)`` for ``shift >= 0``."""
    if shift < 0:
        raise InvalidInputError(f"negative shift {shift}")
    lo, hi = _bounds(bits, Bounds.TWOS_COMPLEMENT)
    return min(max(x * 2**shift, lo), hi)


# --- saturation and wrapping -------------------------------------------------------------------


def saturate(x, bits):
    lo, hi = _bounds(bits, Bounds.TWOS_COMPLEMENT)
    return min(max(x, lo), hi)


def saturate_symmetric(x, bits):
    lo, hi = _bounds(bits, Bounds.SYMMETRIC)
    return min(max(x, lo), hi)


def saturate_unsigned(x, bits):
    return min(max(x, 0), 2**bits - 1)


def saturate_count(x, bits):
    y = saturate(x, bits)
    return y, int(y != x)


def saturate_symmetric_count(x, bits):
    y = saturate_symmetric(x, bits)
    return y, int(y != x)


def saturate_unsigned_count(x, bits):
    y = saturate_unsigned(x, bits)
    return y, int(y != x)


def wrap(x, bits):
    return _wrap(x, bits)


def wrap_unsigned(x, bits):
    return x % 2**bits


# --- fixed-point multiplies --------------------------------------------------------------------


def multiply_shift_right_round_half_up(a, b, shift):
    return shift_right_round_half_up(a * b, shift)


def multiply_shift_right_round_half_away(a, b, shift):
    return shift_right_round_half_away(a * b, shift)


def _c_div(n: int, d: int) -> int:
    """C's ``/`` on integers: the quotient truncated toward zero."""
    q = abs(n) // abs(d)
    return q if (n >= 0) == (d > 0) else -q


def saturating_rounding_doubling_high_mul_round_half_up(a, b):
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` (fixedpoint.h), transcribed literally."""
    int32_min, int32_max = -(2**31), 2**31 - 1
    if not (int32_min <= a <= int32_max and int32_min <= b <= int32_max):
        raise InvalidInputError(f"operands {a}, {b} outside int32")
    if a == b == int32_min:
        return int32_max
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _c_div(ab + nudge, 1 << 31)


def rounding_divide_by_pot(x, exponent):
    return shift_right_round_half_away(x, exponent)


# --- float conversions -------------------------------------------------------------------------


def float32_to_int_round_half_even_saturate(x, bits, *, signed=True, nan=NanPolicy.ERROR):
    """Python's ``round`` (ties to even, exact on a double holding a float32), then clamp."""
    x = float(x)
    if not math.isnan(x) and float(np.float32(x)) != x:
        raise InvalidInputError(f"{x!r} is not a float32 value")
    lo, hi = _bounds(bits, Bounds.TWOS_COMPLEMENT) if signed else (0, 2**bits - 1)
    if math.isnan(x):
        if nan is NanPolicy.ERROR:
            raise InvalidInputError("NaN")
        return min(max(-(2**31), lo), hi)
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(max(round(x), lo), hi)


def float64_to_int_round_half_away_add_truncate(x, *, bits=64):
    """``(int64)(x >= 0 ? x + 0.5 : x - 0.5)`` in IEEE double, then clamp to ``bits``."""
    x = float(x)
    if math.isnan(x):
        raise InvalidInputError("NaN")
    y = x + 0.5 if x >= 0 else x - 0.5  # Python floats are IEEE doubles: the add rounds
    lo, hi = _bounds(bits, Bounds.TWOS_COMPLEMENT)
    if math.isinf(y):
        return hi if y > 0 else lo
    return min(max(int(y), lo), hi)  # int() truncates toward zero, exactly


def float64_round_half_away_add_truncate(x):
    """``trunc(x + 0.5)`` or ``trunc(x - 0.5)`` by the sign, the add in IEEE double (Python
    floats are doubles); ``±inf`` and NaN pass through."""
    x = float(x)
    y = x + 0.5 if x >= 0 else x - 0.5
    return float(math.trunc(y)) if math.isfinite(y) else y


def _round_to_float32(v: Fraction) -> float:
    """``v`` rounded to the nearest binary32 value, ties to even (overflow gives ±inf)."""
    if v == 0:
        return 0.0
    mag = abs(v)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    while Fraction(2) ** e > mag:
        e -= 1
    while Fraction(2) ** (e + 1) <= mag:
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 23)  # 24-bit significand; subnormals below 2**-126
    q = mag / ulp
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = n * ulp
    if r >= Fraction(2) ** 128:
        return math.copysign(math.inf, v)
    return float(r) if v > 0 else -float(r)


def float32_round_half_up_add_floor(x):
    """``floor(fl32(x + 0.5))``: the exact sum rounded once to binary32, then the floor."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return x
    return float(math.floor(_round_to_float32(Fraction(x) + Fraction(1, 2))))


# --- rounding shift with a wrapping add ------------------------------------------------------


def shift_right_round_half_up_wrapping_add(x, shift, *, bits=32):
    """``floor(wrap_b(x + 2**(s-1)) / 2**s)`` (``wrap_b(x)`` for ``s == 0``)."""
    if not 0 <= shift <= bits - 1:
        raise InvalidInputError(f"shift {shift} outside [0, {bits - 1}]")
    half = 2 ** (shift - 1) if shift else 0
    return _wrap(x + half, bits) // 2**shift


def shift_right_round_half_up_wrapping_add_count(x, shift, *, bits=32):
    """``(y, wrapped)``: ``wrapped`` when ``wrap_b(x) + 2**(s-1) > 2**(bits-1) - 1``."""
    y = shift_right_round_half_up_wrapping_add(x, shift, bits=bits)
    half = 2 ** (shift - 1) if shift else 0
    return y, _wrap(x, bits) + half > 2 ** (bits - 1) - 1


# --- exact matrix product and windows ----------------------------------------------------------


def matmul_exact(a, b):
    """``a @ b`` for 2-D nested lists of ints: naive Python-int dot products."""
    inner = len(b)
    if any(len(row) != inner for row in a):
        raise InvalidInputError("inner dimensions differ")
    cols = len(b[0]) if b else 0
    return [
        [sum(int(row[k]) * int(b[k][n]) for k in range(inner)) for n in range(cols)] for row in a
    ]


def sliding_windows(x, kernel, *, strides, dilations, pads, pad_value):
    """Windows ``[oh][ow][r][c]`` of the 2-D nested list ``x``, by explicit index arithmetic."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    top, left, bottom, right = pads
    h, w = len(x), len(x[0]) if x else 0

    def at(i, j):  # position (i, j) of the padded (or cropped) input
        i, j = i - top, j - left
        return x[i][j] if 0 <= i < h and 0 <= j < w else pad_value

    hp, wp = h + top + bottom, w + left + right
    oh = (hp - (kh - 1) * dh - 1) // sh + 1 if hp >= (kh - 1) * dh + 1 else 0
    ow = (wp - (kw - 1) * dw - 1) // sw + 1 if wp >= (kw - 1) * dw + 1 else 0
    return [
        [
            [[at(p * sh + r * dh, q * sw + c * dw) for c in range(kw)] for r in range(kh)]
            for q in range(ow)
        ]
        for p in range(oh)
    ]


# --- TFLite's requantization multiply -----------------------------------------------------------


def multiply_by_quantized_multiplier_double_rounding(x, multiplier, shift):
    """TFLite ``MultiplyByQuantizedMultiplier``: ``x * 2**max(shift, 0)`` (an int32), the
    doubling high multiply, then ``RoundingDivideByPOT(max(-shift, 0))``."""
    if not -31 <= shift <= 31:
        raise InvalidInputError(f"shift {shift} outside [-31, 31]")
    if not -(2**31) <= x <= 2**31 - 1:
        raise InvalidInputError(f"x {x} outside int32")
    high = saturating_rounding_doubling_high_mul_round_half_up(x * 2 ** max(shift, 0), multiplier)
    return rounding_divide_by_pot(high, max(-shift, 0))


# --- gemmlowp fixed-point functions (int32 raw values) -----------------------------------------


def _i32(v: int) -> int:
    """C's int32 ``+``/``-`` on a two's-complement machine: wrap."""
    return ((v + 2**31) % 2**32) - 2**31


def saturating_rounding_multiply_by_pot(x, exponent):
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return 2**31 - 1
    if x < -threshold:
        return -(2**31)
    return x * 2**exponent


def rounding_half_sum(a, b):
    s = a + b
    return _c_div(s + (1 if s >= 0 else -1), 2)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    mul = saturating_rounding_doubling_high_mul_round_half_up
    constant_term, one_third = 1895147668, 715827883
    x = _i32(a + (1 << 28))
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(_i32(mul(_i32(x4_over_4 + x3), one_third) + x2), -1)
    return _i32(constant_term + mul(constant_term, _i32(x + poly)))


def exp_on_negative_values(a, integer_bits):
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = _i32((a & (quarter - 1)) - quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod, integer_bits)
    )
    remainder = _i32(a_mod - a)
    barrel = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))  # fmt: skip
    for exponent, multiplier in barrel:
        if integer_bits > exponent and remainder & (1 << (fractional + exponent)):
            result = saturating_rounding_doubling_high_mul_round_half_up(result, multiplier)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0
    return 2**31 - 1 if a == 0 else result


def _newton_half_reciprocal(a):
    mul = saturating_rounding_doubling_high_mul_round_half_up
    half_denominator = rounding_half_sum(a, 2**31 - 1)
    x = _i32(1515870810 + mul(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = _i32((1 << 29) - mul(half_denominator, x))
        x = _i32(x + saturating_rounding_multiply_by_pot(mul(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    return saturating_rounding_multiply_by_pot(_newton_half_reciprocal(a), 1)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    return saturating_rounding_multiply_by_pot(_i32(_newton_half_reciprocal(a) - (1 << 29)), 2)


def logistic(a, integer_bits):
    if a == 0:
        return 1 << 30
    abs_a = a if a > 0 else _i32(-a)
    p = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(_i32(-abs_a), integer_bits))
    return p if a > 0 else _i32(2**31 - 1 - p)


def tanh(a, integer_bits):
    if a == 0:
        return 0
    n = a if a < 0 else _i32(-a)
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return _i32(-t) if a < 0 else t


def reciprocal_with_headroom(x, integer_bits):
    ux = x % 2**32
    if ux == 0:
        raise InvalidInputError("reciprocal_with_headroom: x = 0")
    headroom = 32 - ux.bit_length()
    shifted = ((ux << headroom) % 2**32) - 2**31
    return one_over_one_plus_x_for_x_in_0_1(shifted), integer_bits - headroom


def saturating_rounding_doubling_high_mul_round_half_up_int16(a, b):
    """gemmlowp ``SaturatingRoundingDoublingHighMul<int16_t>``, transcribed literally."""
    if not (-(2**15) <= a < 2**15 and -(2**15) <= b < 2**15):
        raise InvalidInputError(f"operands {a}, {b} outside int16")
    if a == b == -(2**15):
        return 2**15 - 1
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return _c_div(ab + nudge, 1 << 15)


def saturating_doubling_high_mul_toward_zero_int16(a, b):
    """TFLite ``SaturatingDoublingHighMul(int16_t, int16_t)``, transcribed literally."""
    if not (-(2**15) <= a < 2**15 and -(2**15) <= b < 2**15):
        raise InvalidInputError(f"operands {a}, {b} outside int16")
    if a == b == -(2**15):
        return 2**15 - 1
    return _c_div(a * b, 1 << 15)
