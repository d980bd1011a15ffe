"""Right shifts that divide by ``2**shift`` and round, one function per tie rule.

Every function here computes ``round(x / 2**shift)`` exactly on ℤ; the tie rule is in its name
(DESIGN principle 3). ``shift`` may be an int or an array broadcast against ``x``. Shift 0
returns ``x`` unchanged. Shifts of any size are exact; for int64 operands, shifts of 64 or more
are worked out explicitly (NumPy's ``>>`` with a count of 64 or more is not relied on).

How it stays exact and fast (DESIGN principles 1 and 8): the int64 kernels, their bounds and
their pass counts are in :mod:`quantemu.intmath._shift_kernels`; large arrays are split across
cores by :mod:`quantemu.intmath.parallel`, with the same results at any thread count.

Negative shifts follow :class:`~quantemu.intmath.policies.NegativeShift`.
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import (
    INT64_MAX,
    INT64_MIN,
    as_int_operand,
    as_result,
    check_bits,
    dtype_bound,
)
from quantemu.intmath._shift_kernels import (
    FLOOR,
    HALF_AWAY,
    HALF_DOWN,
    HALF_EVEN,
    HALF_UP,
    TOWARD_ZERO,
    round_from_floor,
    round_into,
)
from quantemu.intmath.parallel import map_chunks, splittable
from quantemu.intmath.policies import NegativeShift

__all__ = [
    "shift_left_saturate",
    "shift_right_floor",
    "shift_right_round_half_away",
    "shift_right_round_half_down",
    "shift_right_round_half_even",
    "shift_right_round_half_up",
    "shift_right_toward_zero",
]


def bad_summary(values: np.ndarray, bad: np.ndarray) -> str:
    """``'first -3, 2 of 10 values'`` for the error messages (principle 7)."""
    bad = np.asarray(bad)
    values = np.broadcast_to(values, bad.shape)
    first = values[bad].flat[0] if bad.ndim else values[()]
    return f"first {int(first)}, {int(np.count_nonzero(bad))} of {bad.size} value(s)"


# --- positive shifts ---------------------------------------------------------------------------


def _shift_cap(x: np.ndarray) -> int:
    """For object ``x`` with ``|x| < 2**L``: ``L + 2``. Beyond it ``|x / 2**s| < 1/4``, so no
    rule's result changes (rounding gives 0, floor 0 or -1)."""
    if x.size == 0:
        return 2
    return max(abs(int(x.min())), abs(int(x.max()))).bit_length() + 2


def _huge_int64(x: np.ndarray, s, rule: str):
    """The int64 results for shifts ``s >= 64`` (``s`` an int or an array), worked out.

    ``|x| <= 2**63``, so ``|x / 2**s| <= 1/2``, with equality only for ``x = -2**63`` at
    ``s = 64``: the tie ``-1/2``. Floor gives -1 for ``x < 0``; toward zero, half up and half
    even give 0 everywhere; half down and half away give -1 for that tie and 0 elsewhere.
    """
    if rule == FLOOR:
        return x >> 63
    if rule in (HALF_DOWN, HALF_AWAY):
        return -((x == INT64_MIN) & (np.asarray(s) == 64)).astype(np.int64)
    return np.zeros(np.broadcast(x, s).shape, dtype=np.int64)


def _right_scalar(x: np.ndarray, s: int, rule: str, bound=None, owned=False):
    """Rounding right shift of ``x`` (int64 or object) by one ``s >= 0``.

    int64 shifts in ``[1, 62]`` go through :func:`~._shift_kernels.round_into`, chunk by chunk
    on several cores for large arrays (:mod:`~quantemu.intmath.parallel`); ``owned``: ``x`` may
    take the result.
    """
    if s == 0:
        return x.copy()
    if x.dtype == object:
        return round_from_floor(x, min(s, _shift_cap(x)), rule)
    if s >= 64:
        return _huge_int64(x, s, rule)
    if s == 63:
        return round_from_floor(x, s, rule)
    out = x if owned and x.ndim else np.empty_like(x)
    if splittable(x, out):
        map_chunks(lambda o, xc: round_into(o, xc, s, rule, bound), out, x)
    else:
        round_into(out, x, s, rule, bound)
    return out


def _right_array(x: np.ndarray, s: np.ndarray, rule: str):
    """Element-wise shifts ``s >= 0`` (int64 array broadcast with ``x``)."""
    if x.dtype == object:
        return round_from_floor(x, np.minimum(s, _shift_cap(x)).astype(object), rule)
    y = round_from_floor(x, np.minimum(s, 63), rule)
    huge = s >= 64
    return np.where(huge, _huge_int64(x, s, rule), y) if huge.any() else y


def _biased_array(x: np.ndarray, s: np.ndarray, rule: str, bound):
    """Element-wise shifts by ``(x + c) >> s`` with a bias ``c`` per shift, broadcast inside the
    ufuncs (per-channel shifts are never materialised at ``x``'s size); None when a shift is
    outside ``[0, 62]`` or ``max(x) + c`` could overflow. Floor: ``c = 0``; half up:
    ``c = 2**(s-1)``; half down: ``c = 2**(s-1) - 1`` (both 0 for ``s == 0``), as in
    :func:`~quantemu.intmath._shift_kernels._biased_shift`; half away: ``c = 2**(s-1)`` for
    ``x >= 0`` and ``2**(s-1) - 1`` for ``x < 0`` (``s > 0``; the tie of a negative ``x`` then
    stays below the next multiple and floors away from zero). ``bound``: a proven bound of
    ``|x|``.
    """
    if s.size == 0 or int(s.min()) < 0 or int(s.max()) > 62:
        return None
    if rule == FLOOR:
        return x >> s
    half = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)
    c = half if rule in (HALF_UP, HALF_AWAY) else np.maximum(half - 1, 0)
    xmax = bound if bound is not None else (int(x.max()) if x.size else 0)
    if xmax > INT64_MAX - int(c.max()):
        return None
    if rule == HALF_AWAY:
        # x >> 63 is -1 for a negative x: c - 1 there, for the shifts that round (s > 0)
        y = x + c
        y += (x >> 63) * (s > 0)
        y >>= s
        return y
    return (x + c) >> s


# --- left shifts -------------------------------------------------------------------------------


_MAX_EXACT_LEFT = 2**24  # bits; a larger exact left shift would build multi-megabyte integers


def _left_object(x: np.ndarray, k: np.ndarray, lo: int, hi: int, *, saturating: bool, func: str):
    if saturating:
        k = np.minimum(k, hi.bit_length())  # the cap explained in _left
    elif np.any((k > _MAX_EXACT_LEFT) & (x != 0)):
        raise InvalidInputError(
            f"{func}: an exact left shift by more than {_MAX_EXACT_LEFT} bits "
            f"({bad_summary(-k, k > _MAX_EXACT_LEFT)}) is not supported; "
            "use negative=NegativeShift.SATURATING_LEFT with bits=..."
        )
    if x.ndim == 0:  # plain Python ints (NumPy would try to fit huge ones into C longs)
        y = x.item() << int(k)
        return min(max(y, lo), hi) if saturating else y
    y = x << k.astype(object)
    return np.minimum(np.maximum(y, lo), hi) if saturating else y


def _left(x: np.ndarray, k, *, bits: int, saturating: bool, func: str):
    """``x * 2**k`` for ``k >= 0``: saturated to ``bits`` two's-complement bits, or exact.

    Exact mode on int64 raises when a result leaves int64. Saturating mode caps ``k`` at
    ``bits - 1``: for ``k >= bits - 1`` every ``x != 0`` saturates (``|x| * 2**k >= 2**(bits-1)``,
    and ``x = -1`` gives exactly ``lo``), so the cap preserves the result.
    """
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    k = np.asarray(k)
    if x.dtype == object:
        return _left_object(x, k, lo, hi, saturating=saturating, func=func)
    kc = np.minimum(k, bits - 1)  # exact mode has bits = 64, and k > 63 is rejected below
    # x * 2**kc stays in [lo, hi] iff lo >> kc <= x <= hi >> kc (exact: kc <= bits - 1, so
    # 2**kc divides lo).
    x_lo, x_hi = lo >> kc, hi >> kc
    over, under = x > x_hi, x < x_lo
    if not saturating:
        bad = over | under | ((k > 63) & (x != 0))
        if np.any(bad):
            raise InvalidInputError(
                f"{func}: x * 2**(-shift) does not fit in int64 ({bad_summary(x, bad)}); pass "
                "x as an object array (dtype=object) for exact results, or use "
                "negative=NegativeShift.SATURATING_LEFT with bits=..."
            )
    y = np.clip(x, x_lo, x_hi)
    # Shift as uint64 (defined modulo 2**64); the true product is in [lo, hi], so the two's-
    # complement reading of the wrapped bits is that product exactly.
    y = np.asarray(y).view(np.uint64) << np.asarray(kc).astype(np.uint64)
    y = y.view(np.int64)
    return np.where(over, hi, np.where(under, lo, y)) if saturating else y


# --- dispatch ------------------------------------------------------------------------------------


def _check_policy(negative, bits, func: str) -> int | None:
    if not isinstance(negative, NegativeShift):
        raise InvalidInputError(
            f"{func}: negative must be a NegativeShift member, got {negative!r}; "
            "use NegativeShift.ERROR, NegativeShift.LEFT or NegativeShift.SATURATING_LEFT"
        )
    if negative is NegativeShift.SATURATING_LEFT:
        if bits is None:
            raise InvalidInputError(
                f"{func}: negative=NegativeShift.SATURATING_LEFT needs bits= (the two's-"
                "complement width the left-shifted values saturate to), e.g. bits=32"
            )
        return check_bits(bits, func=func)
    if bits is not None:
        raise InvalidInputError(
            f"{func}: bits={bits!r} is only used with negative=NegativeShift.SATURATING_LEFT "
            f"(got negative={negative}); drop bits or change the policy"
        )
    return None


def _shift_operand(shift, func: str) -> tuple[np.ndarray, bool]:
    s, scalar = as_int_operand(shift, func=func, name="shift")
    if s.dtype == object:
        # Shifts beyond +-2**62 change nothing a computer could hold: right shifts are capped by
        # _shift_cap, left shifts of such size overflow (or saturate) any non-zero x.
        s = np.asarray(np.clip(s, -(2**62), 2**62), dtype=object).astype(np.int64)
    return s, scalar


_REMEDY = (
    "negative shifts are errors by default (negative=NegativeShift.ERROR): "
    "pass negative=NegativeShift.LEFT to shift left exactly, "
    "or NegativeShift.SATURATING_LEFT with bits=... to saturate"
)


def _negative_error(s: np.ndarray, func: str, remedy: str) -> InvalidInputError:
    return InvalidInputError(f"{func}: shift must be >= 0 ({bad_summary(s, s < 0)}); {remedy}")


def shift_right(
    xa, x_scalar, shift, rule, *, negative, bits, func, bound=None, owned=False, remedy=_REMEDY
):
    """Dispatch on the shift's shape and sign; ``xa`` is already normalised (``as_int_operand``).

    ``bound``: a bound of ``|xa|`` the caller has proved (lets the int64 fast paths skip their
    ``min``/``max`` scans). ``owned``: ``xa`` may be overwritten. ``remedy``: the advice of the
    negative-shift error.
    """
    bits = _check_policy(negative, bits, func)
    s, s_scalar = _shift_operand(shift, func)
    scalar = x_scalar and s_scalar
    left = negative is not NegativeShift.ERROR
    sat = negative is NegativeShift.SATURATING_LEFT
    if left and not sat and scalar:
        xa = xa.astype(object)  # a Python int result is exact at any size
    if s.ndim == 0:
        sv = int(s)
        if sv >= 0:
            y = _right_scalar(xa, sv, rule, bound, owned)
        elif not left:
            raise _negative_error(s, func, remedy)
        else:
            y = _left(xa, -sv, bits=bits or 64, saturating=sat, func=func)
        return as_result(np.asarray(y, dtype=xa.dtype), scalar)
    if xa.dtype != object and rule in (FLOOR, HALF_UP, HALF_DOWN, HALF_AWAY):
        y = _biased_array(xa, s, rule, bound)
        if y is not None:
            return y
    xb, sb = np.broadcast_arrays(xa, s)
    neg = sb < 0
    if not neg.any():
        return _right_array(xb, sb, rule)
    if not left:
        raise _negative_error(sb, func, remedy)
    y = _right_array(xb, np.maximum(sb, 0), rule)
    y[neg] = _left(xb[neg], -sb[neg], bits=bits or 64, saturating=sat, func=func)
    return y


# --- public API ----------------------------------------------------------------------------------

_NEGATIVE_DOC = """Negative shifts follow ``negative``: ``ERROR`` raises; ``LEFT`` gives
    ``x * 2**-s`` exactly (an error for int64 arrays whose result leaves int64; object arrays and
    Python ints are exact at any size); ``SATURATING_LEFT`` gives ``saturate(x * 2**-s, bits)``
    (``bits`` is then required; the non-negative shifts of the same call are not saturated)."""


def _public(x, shift, *, rule, negative, bits, func):
    xa, x_scalar = as_int_operand(x, func=func, name="x")
    # A <= 32-bit integer array was widened into a fresh int64 copy: its dtype bounds |x| (no
    # scan) and the copy can take the result (no second full-size buffer).
    bound = dtype_bound(x)
    return shift_right(
        xa,
        x_scalar,
        shift,
        rule,
        negative=negative,
        bits=bits,
        func=func,
        bound=bound,
        owned=bound is not None,
    )


def shift_right_round_half_up(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` rounded to nearest, ties toward +inf.

    Formula on ℤ: ``floor((x + 2**(s-1)) / 2**s)`` for ``s >= 1``; ``x`` for ``s == 0``.

    Policy: ties go up (``-2.5 -> -2``, ``2.5 -> 3``); the result is exact at every size (no
    wrap: the ``+ 2**(s-1)`` is not done in a fixed width). ``s >= 64`` gives 0 for every int64
    ``x`` (``-2**63 / 2**64 = -1/2`` is a tie and goes up to 0). NEGATIVE

    Mirrors: XMOS XS3 ``VLSAT``/``VLMUL``/``VDEPTH8`` rounding, ``RSHR(v, s)`` on the xs3
    conformance page (without lib_nn's int32 wrap of the rounding add, ``RSHR_W``).

    >>> [shift_right_round_half_up(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-1, -1, 0, 0, 1, 1, 2]
    >>> [shift_right_round_half_up(v, 4) for v in (-9, -8, 8, 2**63 - 1)]
    [-1, 0, 1, 576460752303423488]
    >>> [shift_right_round_half_up(v, s) for v, s in ((-2**63, 64), (-2**63, 63), (7, 0))]
    [0, -1, 7]
    >>> shift_right_round_half_up(3, -2, negative=NegativeShift.LEFT)
    12
    """
    return _public(
        x, shift, rule=HALF_UP, negative=negative, bits=bits, func="shift_right_round_half_up"
    )


def shift_right_round_half_down(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` rounded to nearest, ties toward -inf.

    Formula on ℤ: ``ceil((x - 2**(s-1)) / 2**s) = -floor((-x + 2**(s-1)) / 2**s)`` for
    ``s >= 1``; ``x`` for ``s == 0``.

    Policy: ties go down (``-2.5 -> -3``, ``2.5 -> 2``); exact at every size. ``s >= 64`` gives 0
    for int64 ``x`` except the tie ``-2**63 / 2**64 = -1/2``, which goes down to -1. NEGATIVE

    Mirrors: no particular instruction; it completes the set (``-half_up(-x)``).

    >>> [shift_right_round_half_down(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-2, -1, -1, 0, 0, 1, 1]
    >>> [shift_right_round_half_down(v, s) for v, s in ((-2**63, 64), (2**63 - 1, 64), (7, 0))]
    [-1, 0, 7]
    """
    return _public(
        x, shift, rule=HALF_DOWN, negative=negative, bits=bits, func="shift_right_round_half_down"
    )


def shift_right_round_half_away(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` rounded to nearest, ties away from zero.

    Formula on ℤ: ``sign(x) * floor((|x| + 2**(s-1)) / 2**s)`` for ``s >= 1``; ``x`` for
    ``s == 0``.

    Policy: ties go away from zero (``-2.5 -> -3``, ``2.5 -> 3``); exact at every size.
    ``s >= 64`` gives 0 for int64 ``x`` except ``-2**63 / 2**64 = -1/2``, which goes to -1.
    NEGATIVE

    Mirrors: NVDLA's converters and "truncate" (``rhaz(v, s)`` on the nvdla conformance page;
    ``SSHR`` is ``saturate(this with SATURATING_LEFT, b)``) and gemmlowp ``RoundingDivideByPOT``.

    >>> [shift_right_round_half_away(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-2, -1, -1, 0, 1, 1, 2]
    >>> [shift_right_round_half_away(v, s) for v, s in ((-2**63, 64), (2**63 - 1, 64), (-5, 0))]
    [-1, 0, -5]
    >>> shift_right_round_half_away(-3, -4, negative=NegativeShift.SATURATING_LEFT, bits=8)
    -48
    >>> shift_right_round_half_away(-9, -4, negative=NegativeShift.SATURATING_LEFT, bits=8)
    -128
    """
    return _public(
        x, shift, rule=HALF_AWAY, negative=negative, bits=bits, func="shift_right_round_half_away"
    )


def shift_right_round_half_even(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` rounded to nearest, ties to the even integer.

    Formula on ℤ: with ``q = floor(x / 2**s)`` and ``r = x - q * 2**s``: ``q + 1`` if
    ``2r > 2**s`` or (``2r == 2**s`` and ``q`` odd), else ``q``; ``x`` for ``s == 0``.

    Policy: ties to even (``-2.5 -> -2``, ``-1.5 -> -2``, ``2.5 -> 2``); exact at every size.
    ``s >= 64`` gives 0 for every int64 ``x`` (the tie ``-1/2`` goes to 0). NEGATIVE

    Mirrors: IEEE 754 roundTiesToEven applied to a fixed-point value (the x86 MXCSR default, as
    in ``cvtps2dq``), used where a target rescales integers "like the float path".

    >>> [shift_right_round_half_even(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-2, -1, 0, 0, 0, 1, 2]
    >>> [shift_right_round_half_even(v, 2) for v in (-6, -5, -2, 2, 5, 6)]
    [-2, -1, 0, 0, 1, 2]
    >>> [shift_right_round_half_even(v, s) for v, s in ((-2**63, 64), (-2**63, 63), (2**62, 63))]
    [0, -1, 0]
    """
    return _public(
        x, shift, rule=HALF_EVEN, negative=negative, bits=bits, func="shift_right_round_half_even"
    )


def shift_right_floor(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` rounded toward -inf: the arithmetic right shift.

    Formula on ℤ: ``floor(x / 2**s)``.

    Policy: no ties (every fraction goes down); exact at every size. For ``s >= 63`` int64 ``x``
    gives -1 when negative, else 0. NEGATIVE

    Mirrors: the two's-complement arithmetic shift (``SAR``/``ASR``; C ``>>`` on a signed value
    with the usual implementation-defined choice), the ``>>`` of vendor pseudo-code.

    >>> [shift_right_floor(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-2, -1, -1, 0, 0, 1, 1]
    >>> [shift_right_floor(v, s) for v, s in ((-2**63, 64), (-1, 100), (2**63 - 1, 63), (5, 0))]
    [-1, -1, 0, 5]
    """
    return _public(x, shift, rule=FLOOR, negative=negative, bits=bits, func="shift_right_floor")


def shift_right_toward_zero(x, shift, *, negative=NegativeShift.ERROR, bits=None):
    """``x / 2**shift`` truncated toward zero.

    Formula on ℤ: ``sign(x) * floor(|x| / 2**s)``.

    Policy: no ties (fractions drop toward zero); exact at every size; ``s >= 64`` gives 0 for
    every int64 ``x``. NEGATIVE

    Mirrors: C/C++ integer division ``x / (1 << s)`` (C99 truncating division).

    >>> [shift_right_toward_zero(v, 1) for v in (-3, -2, -1, 0, 1, 2, 3)]
    [-1, -1, 0, 0, 0, 1, 1]
    >>> [shift_right_toward_zero(v, s) for v, s in ((-2**63, 63), (-2**63, 64), (-7, 0))]
    [-1, 0, -7]
    """
    return _public(
        x, shift, rule=TOWARD_ZERO, negative=negative, bits=bits, func="shift_right_toward_zero"
    )


def shift_left_saturate(x, shift, bits):
    """``x * 2**shift`` saturated to ``bits`` two's-complement bits.

    Formula on ℤ: ``clamp(x * 2**s, -2**(bits-1), 2**(bits-1) - 1)`` for ``s >= 0``.

    Policy: every out-of-range product saturates (never wraps), at any shift (``s >= bits``
    saturates every ``x != 0``); ``s == 0`` is ``saturate(x, bits)``. Negative shifts are errors
    (use a ``shift_right_*`` function). ``bits`` in ``[1, 64]``.

    Mirrors: the NVDLA "shifter", ``y = saturate(x << shifter)`` (and ``SSHR`` for ``s < 0``).

    >>> [shift_left_saturate(v, 4, 8) for v in (-9, -8, -1, 0, 7, 8)]
    [-128, -128, -16, 0, 112, 127]
    >>> [shift_left_saturate(v, s, 64) for v, s in ((-1, 63), (1, 63), (-1, 64), (3, 0))]
    [-9223372036854775808, 9223372036854775807, -9223372036854775808, 3]
    """
    func = "shift_left_saturate"
    bits = check_bits(bits, func=func)
    xa, x_scalar = as_int_operand(x, func=func, name="x")
    s, s_scalar = _shift_operand(shift, func)
    if np.any(s < 0):
        raise InvalidInputError(
            f"{func}: shift must be >= 0 ({bad_summary(s, s < 0)}); "
            "for a right shift use one of the shift_right_* functions"
        )
    xb, sb = np.broadcast_arrays(xa, s) if s.ndim else (xa, s)
    y = _left(xb, sb, bits=bits, saturating=True, func=func)
    return as_result(np.asarray(y, dtype=xa.dtype), x_scalar and s_scalar)


for _f in (
    shift_right_round_half_up,
    shift_right_round_half_down,
    shift_right_round_half_away,
    shift_right_round_half_even,
    shift_right_floor,
    shift_right_toward_zero,
):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.replace("NEGATIVE", _NEGATIVE_DOC)
del _f
