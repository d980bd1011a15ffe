"""A rounding right shift whose rounding add is done in a fixed width, where it wraps.

C code that rounds with ``(x + (1 << (s - 1))) >> s`` on an ``int32_t`` adds in 32 bits: near the
top of the range the rounding add wraps negative. :func:`shift_right_round_half_up` never wraps;
the functions here reproduce the wrap, by name (DESIGN principles 1 and 3).

Exactness (int64 throughout): the operand is read as a ``bits``-bit value (``wrap``), the
rounding constant ``2**(s-1) < 2**(bits-1)`` is added modulo ``2**64`` (unsigned, defined) and the
sum wrapped to ``bits`` bits; ``2**bits`` divides ``2**64``, so that is ``wrap_b(x + 2**(s-1))``
exactly. The floor shift of the wrapped sum is NumPy's arithmetic ``>>`` (``s <= 61``).
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import as_int_operand, as_result, check_bits
from quantemu.intmath.saturation import wrap

__all__ = [
    "shift_right_round_half_up_wrapping_add",
    "shift_right_round_half_up_wrapping_add_count",
]

MAX_BITS = 62  # |wrap_b(x)| + 2**(s-1) < 2**62: the sums and the flag test stay in int64


def _operands(x, shift, bits, func: str):
    """``(x read as bits-bit int64, shift int64, rounding constant, lo, scalar)``."""
    bits = check_bits(bits, func=func, high=MAX_BITS)
    s, s_scalar = as_int_operand(shift, func=func, name="shift")
    if s.dtype == object or np.any((s < 0) | (s > bits - 1)):
        bad = np.asarray(s, dtype=object)
        bad = bad[(bad < 0) | (bad > bits - 1)] if bad.ndim else bad
        first = int(bad.flat[0]) if bad.ndim else int(bad)
        raise InvalidInputError(
            f"{func}: shift must be in [0, bits - 1] = [0, {bits - 1}] (first bad value {first}); "
            f"C's 1 << (s - 1) and >> s are undefined beyond that width"
        )
    s = s.astype(np.int64, copy=False)
    xa, x_scalar = as_int_operand(x, func=func, name="x")
    if xa.dtype == object:
        # Python ints beyond int64: their bits-bit reading. int64 operands need no such pass,
        # since wrap_b(x + h) = wrap_b(wrap_b(x) + h) (see _wrapped_sum).
        xa = np.asarray(wrap(xa, bits), dtype=np.int64)
    half = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0).astype(np.int64)
    return bits, xa, s, half, -(1 << (bits - 1)), x_scalar and s_scalar


def _wrapped_sum(xa: np.ndarray, half: np.ndarray, bits: int) -> np.ndarray:
    """``wrap_b(x + half)``: the add modulo ``2**64`` on unsigned views, then the wrap."""
    total = np.add(xa.view(np.uint64), half.view(np.uint64)).view(np.int64)
    return np.asarray(wrap(total, bits), dtype=np.int64)


def shift_right_round_half_up_wrapping_add(x, shift, *, bits: int = 32):
    """``x / 2**shift`` rounded half up, with the rounding add wrapping at ``bits`` bits.

    Formula on ℤ: ``floor(wrap_b(x + 2**(s-1)) / 2**s)`` for ``s >= 1`` and ``wrap_b(x)`` for
    ``s == 0``, where ``wrap_b`` is :func:`~quantemu.intmath.wrap` to ``bits`` bits.

    Policy: ties go up (toward +inf) as in :func:`~quantemu.intmath.shift_right_round_half_up`,
    whose result this is wherever ``wrap_b(x) + 2**(s-1)`` fits ``bits`` bits. Above that the
    add wraps negative: ``x = 2**31 - 1, s = 3`` gives ``-2**28``, not ``2**28``. ``x`` is read
    as a ``bits``-bit value first (C's operand type). ``bits`` in ``[1, 62]``; ``shift`` (an int
    or an array broadcast against ``x``) in ``[0, bits - 1]``, else an error (C's ``1 << (s-1)``
    and ``>> s`` are undefined beyond). No saturation.

    Mirrors: lib_nn's x86 host reference of the XS3 output stage, ``RSHR_W`` on the xs3
    conformance page (``(int32_t)(v + (1 << (s - 1))) >> s``); the device's ``VLSAT`` does not
    wrap (:func:`~quantemu.intmath.shift_right_round_half_up`).

    >>> f = shift_right_round_half_up_wrapping_add
    >>> [f(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-1, -1, 0, 0, 1, 1, 2]
    >>> [f(v, s) for v, s in ((2**31 - 1, 3), (2**31 - 4, 3), (2**31 - 5, 3), (-2**31, 31))]
    [-268435456, -268435456, 268435455, -1]
    >>> [f(v, s, bits=8) for v, s in ((127, 1), (126, 1), (125, 1), (-128, 0), (128, 0))]
    [-64, 63, 63, -128, -128]
    """
    func = "shift_right_round_half_up_wrapping_add"
    bits, xa, s, half, _, scalar = _operands(x, shift, bits, func)
    y = _wrapped_sum(xa, half, bits) >> s
    return as_result(y, scalar)


def shift_right_round_half_up_wrapping_add_count(x, shift, *, bits: int = 32):
    """:func:`shift_right_round_half_up_wrapping_add` and where its rounding add wrapped.

    Returns ``(y, wrapped)``: ``wrapped`` is a bool per element (a bool for scalar calls), true
    where ``wrap_b(x) + 2**(s-1) > 2**(bits-1) - 1``, the sum the C add wraps. Formula, policy
    and mirror as :func:`shift_right_round_half_up_wrapping_add`. The flag needs no second add:
    the sum ``t = wrap_b(x) + h`` lies in ``[lo + h, hi + h]``; it wrapped iff ``wrap_b(t)`` is
    below ``lo + h`` (a wrapped sum is ``t - 2**bits <= lo + h - 1``).

    >>> f = shift_right_round_half_up_wrapping_add_count
    >>> f(2**31 - 1, 3), f(2**31 - 5, 3), f(5, 0)
    ((-268435456, True), (268435455, False), (5, False))
    >>> y, w = f(np.array([2**31 - 1, 2**31 - 32768, 5]), np.array([3, 16, 1]))
    >>> y.tolist(), w.tolist()
    ([-268435456, -32768, 3], [True, True, False])
    """
    func = "shift_right_round_half_up_wrapping_add_count"
    bits, xa, s, half, lo, scalar = _operands(x, shift, bits, func)
    total = _wrapped_sum(xa, half, bits)
    wrapped = total < lo + half
    y = total >> s
    if scalar:
        return int(y), bool(wrapped)
    return y, np.asarray(wrapped)
