"""Fixed-point multiplies: an exact product, then one rounding right shift.

The product is formed in int64 only when ``max|a| * max|b| <= 2**63 - 1`` (one min/max per
operand proves it); otherwise on Python ints (object arrays), so it never wraps (DESIGN
principle 1). Nothing here saturates unless the name says so. Large arrays of one shape are
multiplied and rounded chunk by chunk on several cores (:mod:`quantemu.intmath.parallel`), each
chunk with its own bound.
"""

from __future__ import annotations

import numbers

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import INT64_MAX, INT64_MIN, as_int_operand, as_result, dtype_bound
from quantemu.intmath._shift_kernels import round_into
from quantemu.intmath.parallel import map_chunks, splittable
from quantemu.intmath.policies import NegativeShift
from quantemu.intmath.rounding import HALF_AWAY, HALF_UP, bad_summary, shift_right

__all__ = [
    "multiply_by_quantized_multiplier_double_rounding",
    "multiply_shift_right_round_half_away",
    "multiply_shift_right_round_half_up",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul_round_half_up",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _operand(x, name: str, func: str) -> tuple[np.ndarray, bool, int]:
    """``(array, is_scalar, bound of |x|)``.

    Integer arrays of 32 bits or fewer are used as they are, with the bound of their dtype: no
    scan, and no full-size int64 copy of their own (see :func:`_product`).
    """
    bound = dtype_bound(x)
    if bound is not None:
        return x, False, bound
    arr, scalar = as_int_operand(x, func=func, name=name)
    bound = max(-int(arr.min()), int(arr.max())) if arr.size else 0
    return arr, scalar, bound


def _product(aa: np.ndarray, bb: np.ndarray) -> np.ndarray:
    """``aa * bb`` in one fresh int64 array; the caller has proved ``|aa * bb| <= 2**63 - 1``.

    With a narrow operand, widening the wider one and multiplying in place by the other is
    faster than ``np.multiply(aa, bb, dtype=np.int64)``, whose casts of both operands go through
    small buffers. The widening is exact and, as the product does not overflow, so is the
    in-place multiply (its int64 loop casts the narrow operand exactly).
    """
    if aa.dtype == bb.dtype == np.int64 or aa.ndim == 0 or bb.ndim == 0:
        return np.asarray(np.multiply(aa, bb, dtype=np.int64))
    wide, narrow = (aa, bb) if aa.dtype.itemsize >= bb.dtype.itemsize else (bb, aa)
    shape = np.broadcast_shapes(aa.shape, bb.shape)
    if wide.shape != shape:
        return np.asarray(np.multiply(aa, bb, dtype=np.int64))
    p = wide.astype(np.int64)  # astype copies by default: p is ours to overwrite
    p *= narrow
    return p


def _bound(x: np.ndarray) -> int:
    """A bound of ``|x|``: from the dtype when it is 32 bits or narrower, else one min/max."""
    bound = dtype_bound(x)
    if bound is None:
        bound = max(-int(x.min()), int(x.max())) if x.size else 0
    return bound


def _product_shift_into(out: np.ndarray, a: np.ndarray, b: np.ndarray, s: int, rule: str) -> bool:
    """``out[...] = round(a * b / 2**s)`` when ``|a * b|`` provably fits int64, else False.

    The product is exact under the bound (``|a * b| <= bound <= 2**63 - 1``); with a narrow
    operand, the wide one is widened into ``out`` and multiplied in place (see
    :func:`_product`). The rounding is :func:`~._shift_kernels.round_into` in place.
    """
    bound = _bound(a) * _bound(b)
    if bound > INT64_MAX:
        return False
    if a.dtype == b.dtype == np.int64:
        np.multiply(a, b, out=out)
    else:
        wide, narrow = (a, b) if a.dtype.itemsize >= b.dtype.itemsize else (b, a)
        out[...] = wide
        out *= narrow
    if s:
        round_into(out, out, s, rule, bound)
    return True


def _chunked(a, b, shift, rule: str):
    """Large same-shape integer arrays and one shift in ``[0, 62]``: product and rounding chunk
    by chunk on several cores. None when that does not apply, or when a chunk's product could
    leave int64 (the general path then decides the result type)."""
    arrays = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    if not arrays or a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        return None
    if np.uint64 in (a.dtype, b.dtype):  # values may exceed int64: the general path decides
        return None
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, numbers.Integral):
        return None
    s = int(shift)
    if not 0 <= s <= 62 or not splittable(a, b):
        return None
    out = np.empty(a.shape, dtype=np.int64)
    done = map_chunks(lambda o, ac, bc: _product_shift_into(o, ac, bc, s, rule), out, a, b)
    return out if all(done) else None


def _multiply_shift(a, b, shift, rule: str, func: str):
    y = _chunked(a, b, shift, rule)
    if y is not None:
        return y
    aa, a_scalar, a_bound = _operand(a, "a", func)
    bb, b_scalar, b_bound = _operand(b, "b", func)
    bound = a_bound * b_bound
    narrow = object not in (aa.dtype, bb.dtype)
    if narrow and bound <= INT64_MAX:
        p = _product(aa, bb)  # |a * b| <= bound <= 2**63 - 1
    else:
        p = np.asarray(aa.astype(object) * bb.astype(object), dtype=object)  # exact
        bound = None
    y = shift_right(
        p,
        a_scalar and b_scalar,
        shift,
        rule,
        negative=NegativeShift.ERROR,
        bits=None,
        func=func,
        bound=bound,
        owned=True,
        remedy="this multiply only shifts right; use shift_left_saturate or multiply by 2**k",
    )
    # int64 operands whose product needed Python ints: int64 again when the results fit.
    if (
        narrow
        and isinstance(y, np.ndarray)
        and y.dtype == object
        and (y.size == 0 or (y.min() >= INT64_MIN and y.max() <= INT64_MAX))
    ):
        y = y.astype(np.int64)
    return y


def multiply_shift_right_round_half_up(a, b, shift):
    """``a * b / 2**shift`` rounded to nearest, ties toward +inf.

    Formula on ℤ: ``floor((a*b + 2**(s-1)) / 2**s)`` for ``s >= 1``; ``a*b`` for ``s == 0``
    (:func:`~quantemu.intmath.rounding.shift_right_round_half_up` of the exact product).

    Policy: ties go up; the product and the rounding add are exact (no wrap, no saturation
    inside: saturate the result yourself if the hardware does). ``shift`` (int or array
    broadcast with ``a * b``) must be ``>= 0``; shifts of any size are exact. Array results are
    int64 when both operands are int64 and every result fits, object arrays otherwise.

    Mirrors: XMOS XS3 ``VLMUL`` (16-bit: ``(a*b) >> 14`` rounded ties up, then saturated by
    the instruction; here without the saturation) and the BSO output stage's multiply.

    >>> [multiply_shift_right_round_half_up(v, 3, 1) for v in (-3, -1, 0, 1, 3)]
    [-4, -1, 0, 2, 5]
    >>> multiply_shift_right_round_half_up(-2**15, -2**15, 14)
    65536
    >>> multiply_shift_right_round_half_up(2**62, 2**62, 64)
    1152921504606846976
    """
    return _multiply_shift(a, b, shift, HALF_UP, "multiply_shift_right_round_half_up")


def multiply_shift_right_round_half_away(a, b, shift):
    """``a * b / 2**shift`` rounded to nearest, ties away from zero.

    Formula on ℤ: ``sign(ab) * floor((|ab| + 2**(s-1)) / 2**s)`` with ``ab = a * b``, for
    ``s >= 1``; ``ab`` for ``s == 0``.

    Policy: ties away from zero; product and rounding exact, no saturation; ``shift >= 0``.
    Array results are int64 when both operands are int64 and every result fits.

    Mirrors: NVDLA's multiply-then-truncate stages (``rhaz(v * scale, shift)``, e.g. the PDP
    reciprocal ``rhaz(s * RECIP_KERNEL_WIDTH, 16)`` on the nvdla conformance page).

    >>> [multiply_shift_right_round_half_away(v, 3, 1) for v in (-3, -1, 0, 1, 3)]
    [-5, -2, 0, 2, 5]
    >>> multiply_shift_right_round_half_away(-9, 21845, 16)
    -3
    """
    return _multiply_shift(a, b, shift, HALF_AWAY, "multiply_shift_right_round_half_away")


def _int32_operand(x, name: str, func: str) -> tuple[np.ndarray, bool]:
    arr, scalar = as_int_operand(x, func=func, name=name)
    if arr.size and (arr.min() < INT32_MIN or arr.max() > INT32_MAX):
        bad = (arr < INT32_MIN) | (arr > INT32_MAX)
        raise InvalidInputError(
            f"{func}: {name} must be int32 values in [{INT32_MIN}, {INT32_MAX}] "
            f"({bad_summary(arr, bad)} outside); gemmlowp's fixed-point multiply is defined on "
            "int32 only: saturate or rescale the operand first"
        )
    return arr.astype(np.int64), scalar


def saturating_rounding_doubling_high_mul_round_half_up(a, b):
    """The high 32 bits of ``2 * a * b``, rounded to nearest with ties toward +inf, saturated.

    Formula on ℤ: ``min(floor((a*b + 2**30) / 2**31), 2**31 - 1)`` for int32 ``a``, ``b``.

    Policy: ties toward +inf, derived from gemmlowp's code: ``nudge = ab >= 0 ? 2**30 :
    1 - 2**30`` then C's truncating ``/ 2**31``. For ``ab >= 0`` that is
    ``floor((ab + 2**30) / 2**31)``; for ``ab < 0`` it is ``-floor((|ab| + 2**30 - 1) / 2**31)``,
    which sends the tie ``-(k + 1/2)`` to ``-k``: up, too (``ab = -2**30`` gives 0, ``2**30``
    gives 1). The only saturation is ``a = b = -2**31`` (``2**31`` does not fit int32), which
    gives ``2**31 - 1``; every other result is in int32. Operands outside int32 are errors.
    Exact in int64: ``|ab| <= 2**62`` and ``ab + 2**30`` fits.

    Mirrors: gemmlowp ``SaturatingRoundingDoublingHighMul`` (fixedpoint.h), ARM NEON
    ``vqrdmulh``, as used by TFLite/gemmlowp requantization.

    >>> f = saturating_rounding_doubling_high_mul_round_half_up
    >>> [f(a, 2**15) for a in (-3 * 2**15, -2**15, 2**15, 3 * 2**15)]  # ab/2**31 = -1.5 .. 1.5
    [-1, 0, 1, 2]
    >>> [f(a, b) for a, b in ((-2**31, -2**31), (-2**31, 2**31 - 1), (2**31 - 1, 2**31 - 1))]
    [2147483647, -2147483647, 2147483646]
    """
    func = "saturating_rounding_doubling_high_mul_round_half_up"
    aa, a_scalar = _int32_operand(a, "a", func)
    bb, b_scalar = _int32_operand(b, "b", func)
    y = np.asarray(aa * bb)  # |ab| <= 2**62
    y += 1 << 30  # <= 2**62 + 2**30
    y >>= 31
    y = np.minimum(y, INT32_MAX)  # only a = b = -2**31 reaches 2**31
    return as_result(np.asarray(y), a_scalar and b_scalar)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp's name for :func:`~quantemu.intmath.rounding.shift_right_round_half_away`.

    Formula on ℤ: ``sign(x) * floor((|x| + 2**(e-1)) / 2**e)``; ``x`` for ``e == 0``. gemmlowp
    computes it as ``(x >> e) + (remainder > threshold)`` with ``remainder = x & (2**e - 1)``,
    ``threshold = (mask >> 1) + (x < 0)``: round half away from zero.

    Policy: ties away from zero; exact for integers of any size and any ``exponent >= 0``
    (gemmlowp asserts ``0 <= exponent <= 31`` on int32; that restriction is not enforced here).
    A negative exponent is an error.

    Mirrors: gemmlowp ``RoundingDivideByPOT`` (fixedpoint.h), TFLite's requantization.

    >>> [rounding_divide_by_pot(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-2, -1, -1, 0, 1, 1, 2]
    >>> rounding_divide_by_pot(-2**31, 31), rounding_divide_by_pot(2**31 - 1, 31)
    (-1, 1)
    """
    func = "rounding_divide_by_pot"
    xa, scalar = as_int_operand(x, func=func, name="x")
    remedy = "gemmlowp's exponent is a right shift; for a left shift use shift_left_saturate"
    bound = dtype_bound(x)  # int32 input: no scan, and its int64 copy takes the result
    return shift_right(
        xa,
        scalar,
        exponent,
        HALF_AWAY,
        negative=NegativeShift.ERROR,
        bits=None,
        func=func,
        bound=bound,
        owned=bound is not None,
        remedy=remedy,
    )


def multiply_by_quantized_multiplier_double_rounding(x, multiplier, shift):
    """TFLite's ``MultiplyByQuantizedMultiplier``: ``x * m * 2**(shift - 31)`` rounded twice.

    Formula on ℤ: with ``l = max(shift, 0)`` and ``r = max(-shift, 0)``,
    ``rounding_divide_by_pot(saturating_rounding_doubling_high_mul_round_half_up(x * 2**l, m),
    r)``. ``multiplier`` and ``shift`` broadcast against ``x`` (per-channel requantization
    passes arrays shaped to the channel axis).

    Policy: two roundings, the first ties toward +inf (the doubling high multiply), the second
    ties away from zero (the rounding divide). ``x * 2**l`` and ``m`` must be int32 values (in
    TFLite's C++ an overflowing ``x * 2**l`` is undefined behaviour): outside that is an
    :class:`InvalidInputError`, never a wrap. The only saturation is the high multiply's
    ``x * 2**l = m = -2**31``. ``shift`` in ``[-31, 31]``.

    Mirrors: ``tflite::MultiplyByQuantizedMultiplier(int32_t, int32_t, int)`` in
    kernels/internal/common.h of builds without ``TFLITE_SINGLE_ROUNDING`` (LiteRT and
    TFLite-Micro by default); with ``shift <= 0`` also ``...SmallerThanOneExp``.

    >>> f = multiply_by_quantized_multiplier_double_rounding
    >>> [f(v, 2**30, -1) for v in (-3, -2, -1, 1, 2, 3)]  # v/4; 1/4 -> 0.5 (up) -> 1 (away)
    [-1, -1, 0, 1, 1, 1]
    >>> f(np.array([5, -5]), np.array([2**30, 2**30]), np.array([0, 2])).tolist()
    [3, -10]
    >>> f(-2**31, -2**31, 0), f(3, 2**30, 1), f(100, 1518500250, -3)  # 100 * 0.7071 / 8
    (2147483647, 3, 9)
    """
    func = "multiply_by_quantized_multiplier_double_rounding"
    sh, _ = as_int_operand(shift, func=func, name="shift")
    if sh.size and (sh.min() < -31 or sh.max() > 31):
        raise InvalidInputError(
            f"{func}: shift must be in [-31, 31], got values in [{sh.min()}, {sh.max()}]; "
            "build the multiplier with TFLite's QuantizeMultiplier"
        )
    xa, scalar = _int32_operand(x, "x", func)
    left = np.maximum(sh, 0)
    if left.any():
        xa = xa << left  # |x| <= 2**31 and left <= 31: fits int64; the product checks int32
    high = saturating_rounding_doubling_high_mul_round_half_up(xa, multiplier)
    y = rounding_divide_by_pot(high, np.maximum(-sh, 0))
    return as_result(np.asarray(y), scalar and np.ndim(multiplier) == 0 and sh.ndim == 0)
