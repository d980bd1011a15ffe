"""gemmlowp's int32 fixed-point transcendental functions (``fixedpoint/fixedpoint.h``).

A gemmlowp ``FixedPoint<int32, I>`` is a raw int32 ``r`` read as ``r / 2**(31 - I)`` (``I``
integer bits). Every function here takes and returns raw values, int64 arrays holding int32
values (or Python ints for scalar calls), and follows gemmlowp's code step by step:

- a product of two fixed-point values is
  :func:`~quantemu.intmath.fixedpoint.saturating_rounding_doubling_high_mul_round_half_up`;
- ``Rescale`` / ``SaturatingRoundingMultiplyByPOT`` is a saturating left shift for a positive
  exponent and :func:`~quantemu.intmath.fixedpoint.rounding_divide_by_pot` (ties away from zero)
  for a negative one;
- ``+``, ``-`` and unary ``-`` are C's int32 operators, which wrap on the two's-complement
  machines these kernels run on: they go through :func:`~quantemu.intmath.saturation.wrap`.
  Inside the documented input domains no wrap ever changes a value; outside them (a softmax
  sum over more than 4096 terms, ``-(-2**31)``) the result is the wrapped one, as in the C.

Two int16 multiplies (gemmlowp's and TFLite's) serve TFLite's int8 HARD_SWISH. The Python-int
twins are in :mod:`quantemu.intmath.reference`.
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import as_result
from quantemu.intmath.fixedpoint import (
    _int32_operand,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul_round_half_up,
)
from quantemu.intmath.saturation import wrap

__all__ = [
    "EXP_BARREL_MULTIPLIERS",
    "exp_on_interval_between_negative_one_quarter_and_0_excl",
    "exp_on_negative_values",
    "logistic",
    "one_minus_x_over_one_plus_x_for_x_in_0_1",
    "one_over_one_plus_x_for_x_in_0_1",
    "reciprocal_with_headroom",
    "rounding_half_sum",
    "saturating_doubling_high_mul_toward_zero_int16",
    "saturating_rounding_doubling_high_mul_round_half_up_int16",
    "saturating_rounding_multiply_by_pot",
    "tanh",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: ``(exponent, raw Q0.31 of exp(-2**exponent))``: the barrel shifter of ``exp_on_negative_values``.
EXP_BARREL_MULTIPLIERS = (
    (-2, 1672461947),
    (-1, 1302514674),
    (0, 790015084),
    (1, 290630308),
    (2, 39332535),
    (3, 720401),
    (4, 242),
)
EXP_MINUS_ONE_EIGHTH_Q31 = 1895147668  # exp(-1/8) in Q0.31
ONE_THIRD_Q31 = 715827883
FORTY_EIGHT_OVER_17_Q2 = 1515870810  # 48/17 in Q2.29
MINUS_32_OVER_17_Q2 = -1010580540  # -32/17 in Q2.29
ONE_Q2 = 1 << 29


def _mul(a, b):
    return saturating_rounding_doubling_high_mul_round_half_up(a, b)


def _add(a, b):
    return wrap(np.asarray(a, dtype=np.int64) + b, 32)  # C int32 +: wraps


def _pot(x: np.ndarray, exponent: int) -> np.ndarray:
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    if exponent == 0:
        return x
    threshold = (1 << (31 - exponent)) - 1
    shifted = np.where(np.abs(x) <= threshold, x, 0) << exponent  # |.| <= 2**31 - 2**e
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, shifted))


def _check_bits(integer_bits: int, lo: int, hi: int, func: str) -> None:
    if not lo <= integer_bits <= hi:
        raise InvalidInputError(
            f"{func}: integer_bits = {integer_bits} outside [{lo}, {hi}]; gemmlowp instantiates "
            "these functions for int32 formats with that many integer bits only"
        )


def _operand(x, func: str):
    arr, scalar = _int32_operand(x, "x", func)
    return np.asarray(arr, dtype=np.int64), scalar


def saturating_rounding_multiply_by_pot(x, exponent: int):
    """``x * 2**exponent`` on int32: saturating for ``exponent > 0``, rounded for ``< 0``.

    Formula on ℤ: ``clamp(x * 2**e, -2**31, 2**31 - 1)`` for ``e >= 0``;
    ``sign(x) * floor((|x| + 2**(-e-1)) / 2**-e)`` for ``e < 0``.

    Policy: left shifts saturate on gemmlowp's threshold ``2**(31-e) - 1`` (``|x|`` above it
    goes to the rail of its sign); right shifts round half away from zero. ``x`` in int32.

    Mirrors: gemmlowp ``SaturatingRoundingMultiplyByPOT<Exponent>`` and ``Rescale``.

    >>> f = saturating_rounding_multiply_by_pot
    >>> [f(x, 2) for x in (-2**29 - 1, -2**29, 2**29 - 1, 2**29)]
    [-2147483648, -2147483648, 2147483644, 2147483647]
    >>> [f(x, -2) for x in (-6, -5, 5, 6)]
    [-2, -1, 1, 2]
    """
    xa, scalar = _operand(x, "saturating_rounding_multiply_by_pot")
    return as_result(np.asarray(_pot(xa, int(exponent))), scalar)


def rounding_half_sum(a, b):
    """``(a + b) / 2`` rounded to nearest, ties away from zero, on int32.

    Formula on ℤ: ``trunc((a + b + sign(a + b)) / 2)`` with ``sign(0) = 1``; always in int32.

    Policy: ties away from zero; exact (the sum is formed in int64).

    Mirrors: gemmlowp ``RoundingHalfSum`` (int32 specialisation), NEON ``VRHADD`` on values of
    one sign.

    >>> [rounding_half_sum(a, 0) for a in (-3, -1, 0, 1, 3)]
    [-2, -1, 0, 1, 2]
    >>> rounding_half_sum(2**31 - 1, 2**31 - 1)
    2147483647
    """
    func = "rounding_half_sum"
    aa, a_scalar = _operand(a, func)
    bb, b_scalar = _operand(b, func)
    s = aa + bb  # |s| <= 2**32
    y = np.where(s >= 0, (s + 1) >> 1, -((1 - s) >> 1))  # C's / truncates toward zero
    return as_result(np.asarray(y), a_scalar and b_scalar)


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    x = _add(a, 1 << 28)  # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _pot(x4, -2)
    poly = _pot(_add(_mul(_add(x4_over_4, x3), ONE_THIRD_Q31), x2), -1)
    return _add(EXP_MINUS_ONE_EIGHTH_Q31, _mul(EXP_MINUS_ONE_EIGHTH_Q31, _add(x, poly)))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """``exp(a)`` in Q0.31 for ``a`` in Q0.31, meant for ``a`` in ``[-1/4, 0)``.

    Formula: with ``x = a + 1/8``, ``e**(-1/8) * (1 + x + x²/2 + x³/6 + x⁴/24)``, each product
    a rounding doubling high multiply, ``x⁴/4`` and the final halving rounding right shifts.

    Policy: every multiply rounds half up (see
    :func:`~quantemu.intmath.fixedpoint.saturating_rounding_doubling_high_mul_round_half_up`),
    every shift half away from zero, adds wrap as C int32 adds (never inside the domain).

    Mirrors: gemmlowp ``exp_on_interval_between_negative_one_quarter_and_0_excl``.

    >>> f = exp_on_interval_between_negative_one_quarter_and_0_excl
    >>> [f(v) for v in (-2**29, -2**28, -1)]  # exp(-1/4), exp(-1/8), exp(0-)
    [1672462419, 1895147668, 2147483155]
    """
    aa, scalar = _operand(a, "exp_on_interval_between_negative_one_quarter_and_0_excl")
    return as_result(np.asarray(_exp_quarter(aa)), scalar)


def _exp_neg(a: np.ndarray, integer_bits: int) -> np.ndarray:
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = (a & (quarter - 1)) - quarter  # in [-1/4, 0): two's-complement & as in C
    result = _exp_quarter(_pot(a_mod, integer_bits))
    remainder = _add(a_mod, -a)
    for exponent, multiplier in EXP_BARREL_MULTIPLIERS:
        if integer_bits > exponent:
            bit = (remainder & (1 << (fractional + exponent))) != 0
            result = np.where(bit, _mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)  # below -32: exp is 0
    return np.where(a == 0, INT32_MAX, result)


def exp_on_negative_values(a, integer_bits: int):
    """``exp(a)`` in Q0.31 for ``a <= 0`` given in Q``integer_bits``.(31 - ``integer_bits``).

    Formula: ``a = -(k/4 + r)`` is split into its quarter part ``r' = (a mod 1/4) - 1/4`` in
    ``[-1/4, 0)``, evaluated by
    :func:`exp_on_interval_between_negative_one_quarter_and_0_excl`, and the rest, whose set
    bits (1/4, 1/2, 1, 2, 4, 8, 16) each multiply by ``exp(-2**k)``
    (:data:`EXP_BARREL_MULTIPLIERS`). ``a = 0`` gives ``2**31 - 1`` (gemmlowp's One() of Q0.31);
    with more than 5 integer bits, ``a < -32`` gives 0.

    Policy: products round half up, shifts half away from zero; ``integer_bits`` in
    ``[0, 29]``. Positive ``a`` is outside gemmlowp's domain (its result is computed the same
    way and means nothing).

    Mirrors: gemmlowp ``exp_on_negative_values<int32, integer_bits>``.

    >>> [exp_on_negative_values(v, 5) for v in (0, -2**26, -2**28, -(2**31))]  # 0, -1, -4, -32
    [2147483647, 790015308, 39332546, 0]
    """
    func = "exp_on_negative_values"
    _check_bits(integer_bits, 0, 29, func)
    aa, scalar = _operand(a, func)
    return as_result(np.asarray(_exp_neg(aa, integer_bits)), scalar)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """``1 / (1 + a)`` in Q2.29 by three Newton-Raphson steps on the half denominator."""
    half_den = rounding_half_sum(a, INT32_MAX)
    x = _add(FORTY_EIGHT_OVER_17_Q2, _mul(half_den, MINUS_32_OVER_17_Q2))
    for _ in range(3):  # gemmlowp's fixed iteration count, not a loop over data
        one_minus = _add(ONE_Q2, -_mul(half_den, x))
        x = _add(x, _pot(_mul(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    """``1 / (1 + a)`` in Q0.31 for ``a`` in Q0.31, meant for ``a`` in ``[0, 1)``.

    Formula: Newton-Raphson on ``d = (1 + a) / 2`` (:func:`rounding_half_sum`), starting from
    ``48/17 - 32/17 * d`` in Q2.29, three steps ``x += 4 * (x * (1 - d * x))``; the result is
    ``x / 2`` read in Q0.31, i.e. ``x`` shifted left by one, saturating.

    Policy: products round half up; the final shift saturates (``a = 0`` gives ``2**31 - 1``).

    Mirrors: gemmlowp ``one_over_one_plus_x_for_x_in_0_1``.

    >>> [one_over_one_plus_x_for_x_in_0_1(v) for v in (0, 2**30, 2**31 - 1)]  # 1, 2/3, 1/2
    [2147483647, 1431655762, 1073741820]
    """
    aa, scalar = _operand(a, "one_over_one_plus_x_for_x_in_0_1")
    return as_result(np.asarray(_pot(_newton_reciprocal(aa), 1)), scalar)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """``(1 - a) / (1 + a)`` in Q0.31 for ``a`` in Q0.31, meant for ``a`` in ``[0, 1)``.

    Formula: the Newton-Raphson reciprocal of :func:`one_over_one_plus_x_for_x_in_0_1`
    (``x ~ 2 / (1 + a)`` in Q2.29), then ``x - 1`` shifted left by two, saturating.

    Policy: as :func:`one_over_one_plus_x_for_x_in_0_1`.

    Mirrors: gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1``.

    >>> [one_minus_x_over_one_plus_x_for_x_in_0_1(v) for v in (0, 2**30, 2**31 - 1)]
    [2147483647, 715827876, -8]
    """
    aa, scalar = _operand(a, "one_minus_x_over_one_plus_x_for_x_in_0_1")
    return as_result(np.asarray(_pot(_add(_newton_reciprocal(aa), -ONE_Q2), 2)), scalar)


def logistic(a, integer_bits: int):
    """``1 / (1 + exp(-a))`` in Q0.31 for ``a`` in Q``integer_bits``.(31 - ``integer_bits``).

    Formula: ``p = one_over_one_plus_x(exp_on_negative_values(-|a|))``; ``p`` for ``a > 0``,
    ``(2**31 - 1) - p`` for ``a < 0`` and ``2**30`` (1/2) for ``a = 0``.

    Policy: as its parts; ``|a|`` and ``-|a|`` are C int32 negations (``a = -2**31`` wraps).
    ``integer_bits`` in ``[0, 29]``.

    Mirrors: gemmlowp ``logistic<int32, integer_bits>`` (TFLite-Micro's int8 LOGISTIC uses 4).

    >>> [logistic(v, 4) for v in (-2**27, 0, 2**27, 2**31 - 1)]  # -1, 0, 1, 16
    [577547421, 1073741824, 1569936226, 2147483406]
    """
    func = "logistic"
    _check_bits(integer_bits, 0, 29, func)
    aa, scalar = _operand(a, func)
    positive = aa > 0
    abs_a = np.where(positive, aa, wrap(-aa, 32))
    p = _pot(_newton_reciprocal(_exp_neg(wrap(-abs_a, 32), integer_bits)), 1)
    y = np.where(aa == 0, 1 << 30, np.where(positive, p, _add(INT32_MAX, -p)))
    return as_result(np.asarray(y), scalar)


def tanh(a, integer_bits: int):
    """``tanh(a)`` in Q0.31 for ``a`` in Q``integer_bits``.(31 - ``integer_bits``).

    Formula: ``t = one_minus_x_over_one_plus_x(exp_on_negative_values(-|a|, integer_bits+1))``
    (the raw ``-|a|`` read with one more integer bit is ``-2|a|``); ``t`` for ``a > 0``, ``-t``
    for ``a < 0``, 0 for ``a = 0``.

    Policy: as its parts; negations are C int32 negations. ``integer_bits`` in ``[0, 28]``.

    Mirrors: gemmlowp ``tanh<int32, integer_bits>`` (TFLite-Micro's int8 TANH uses 4).

    >>> [tanh(v, 4) for v in (-2**27, 0, 2**27, 2**31 - 1)]  # -1, 0, 1, 16
    [-1635510876, 0, 1635510876, 2147483647]
    """
    func = "tanh"
    _check_bits(integer_bits, 0, 28, func)
    aa, scalar = _operand(a, func)
    negative = aa < 0
    n = np.where(negative, aa, wrap(-aa, 32))
    t = _pot(_add(_newton_reciprocal(_exp_neg(n, integer_bits + 1)), -ONE_Q2), 2)
    y = np.where(aa == 0, 0, np.where(negative, wrap(-t, 32), t))
    return as_result(np.asarray(y), scalar)


def reciprocal_with_headroom(x, integer_bits: int):
    """``(r, n)`` with ``1 / x ~ r / 2**(31 + n)``: TFLite's ``GetReciprocal``.

    Formula: ``h = clz32(x)`` (leading zeros of ``x`` read as uint32), ``n = integer_bits - h``,
    ``r = one_over_one_plus_x_for_x_in_0_1(((x << h) mod 2**32) - 2**31)``: ``x`` normalised to
    ``[1, 2)`` and the reciprocal of that in Q0.31.

    Policy: ``x`` in int32 and nonzero (``clz32(0) = 32`` is a shift the C leaves undefined);
    a negative ``x`` (a wrapped sum) has ``h = 0`` and is used as its uint32 bits, as in the C.

    Mirrors: ``tflite::GetReciprocal`` (kernels/internal/common.h), used by int8 SOFTMAX.

    >>> reciprocal_with_headroom(2**19, 12)  # 1.0 in Q12.19: 1/1 with n = 0
    (2147483647, 0)
    >>> reciprocal_with_headroom(3 * 2**18, 12)  # 1.5 in Q12.19
    (1431655762, 0)
    """
    func = "reciprocal_with_headroom"
    xa, scalar = _operand(x, func)
    if xa.size and not xa.all():
        raise InvalidInputError(f"{func}: x = 0 has no reciprocal (clz32(0) = 32 is undefined)")
    ux = xa & 0xFFFFFFFF
    headroom = 32 - np.frexp(ux.astype(np.float64))[1].astype(np.int64)  # exact: ux < 2**53
    shifted = ((ux << headroom) & 0xFFFFFFFF) - (1 << 31)  # in [0, 2**31)
    r = _pot(_newton_reciprocal(shifted), 1)
    n = integer_bits - headroom
    if scalar:
        return int(r[()]), int(n[()])
    return np.asarray(r), np.asarray(n)


def _int16_operand(x, name: str, func: str) -> tuple[np.ndarray, bool]:
    arr, scalar = _int32_operand(x, name, func)
    if arr.size and (arr.min() < -(2**15) or arr.max() > 2**15 - 1):
        raise InvalidInputError(
            f"{func}: {name} must be int16 values, got values in [{arr.min()}, {arr.max()}]; "
            "the int16 fixed-point multiply is defined on int16 only"
        )
    return np.asarray(arr, dtype=np.int64), scalar


def saturating_rounding_doubling_high_mul_round_half_up_int16(a, b):
    """The high 16 bits of ``2 * a * b`` on int16, rounded to nearest with ties toward +inf.

    Formula on ℤ: ``min(floor((a*b + 2**14) / 2**15), 2**15 - 1)`` for int16 ``a``, ``b``
    (gemmlowp: ``nudge = ab >= 0 ? 2**14 : 1 - 2**14``, then C's truncating ``/ 2**15``).

    Policy: ties toward +inf; the only saturation is ``a = b = -2**15``, which gives
    ``2**15 - 1``. Operands outside int16 are errors.

    Mirrors: gemmlowp ``SaturatingRoundingDoublingHighMul<int16_t>``, NEON ``vqrdmulh.s16``.

    >>> f = saturating_rounding_doubling_high_mul_round_half_up_int16
    >>> [f(a, 2**13) for a in (-6, -2, 2, 6)]  # ab / 2**15 = -1.5, -0.5, 0.5, 1.5
    [-1, 0, 1, 2]
    >>> f(-2**15, -2**15), f(2**15 - 1, 2**15 - 1)
    (32767, 32766)
    """
    func = "saturating_rounding_doubling_high_mul_round_half_up_int16"
    aa, a_scalar = _int16_operand(a, "a", func)
    bb, b_scalar = _int16_operand(b, "b", func)
    y = np.minimum((aa * bb + (1 << 14)) >> 15, 2**15 - 1)  # |ab| <= 2**30
    return as_result(np.asarray(y), a_scalar and b_scalar)


def saturating_doubling_high_mul_toward_zero_int16(a, b):
    """The high 16 bits of ``2 * a * b`` on int16, truncated toward zero.

    Formula on ℤ: ``min(trunc(a*b / 2**15), 2**15 - 1)`` for int16 ``a``, ``b``.

    Policy: rounds toward zero (C's ``/``), no nudge; ``a = b = -2**15`` saturates to
    ``2**15 - 1``. Operands outside int16 are errors.

    Mirrors: TFLite's ``SaturatingDoublingHighMul(int16_t, int16_t)``
    (kernels/internal/common.h), used by the int8 HARD_SWISH reference kernel.

    >>> f = saturating_doubling_high_mul_toward_zero_int16
    >>> [f(a, 2**13) for a in (-6, -5, -2, 2, 5, 6)]  # ab / 2**15 = -1.5, -1.25, -0.5 ...
    [-1, -1, 0, 0, 1, 1]
    >>> f(-2**15, -2**15)
    32767
    """
    func = "saturating_doubling_high_mul_toward_zero_int16"
    aa, a_scalar = _int16_operand(a, "a", func)
    bb, b_scalar = _int16_operand(b, "b", func)
    ab = aa * bb  # |ab| <= 2**30
    y = np.minimum(np.where(ab >= 0, ab >> 15, -((-ab) >> 15)), 2**15 - 1)
    return as_result(np.asarray(y), a_scalar and b_scalar)
