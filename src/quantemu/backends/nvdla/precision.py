"""NVDLA's precision-control primitives (seed 001): converter, truncate, shifter.

Thin, named compositions of :mod:`quantemu.intmath` primitives, with the expansion in each
docstring (DESIGN principle 3). Every rounding is half away from zero; every saturation is
two's complement. Each returns ``(y, flag)`` where ``flag`` is the per-element boolean the NVDLA
saturation counters add up, computed the way the cmod computes it (``conformance/nvdla.md`` §1.2):

* for a rounding stage (converter, truncate) the flag is the **±1 rule** of ``SHR_FLAG``: it
  fires only when the *floored* value lies more than one step outside the output range, so an
  8-bit floor of 128 or -129 is clamped but not counted;
* for the shifter (no rounding) the flag is "the saturation changed the value".

Inputs are NumPy integer arrays (or Python ints); results are int64 arrays (or object arrays of
Python ints when an intermediate would not fit in int64).
"""

from __future__ import annotations

import numbers

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath import (
    saturate,
    shift_left_saturate,
    shift_right_floor,
    shift_right_round_half_away,
)

__all__ = ["converter", "shifter", "shr", "shr_flag", "truncate"]

_INT64_SAFE = 1 << 62


def _int_array(x, func: str, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iuO":
        raise InvalidInputError(
            f"nvdla.{func}: {name} must be an integer array, got dtype {a.dtype}; NVDLA "
            "datapaths are integer (convert explicitly after checking the values are integral)"
        )
    if a.dtype.kind == "O" or (a.dtype == np.uint64 and a.size and int(a.max()) >= 1 << 63):
        return a.astype(object)
    return a.astype(np.int64, copy=False)  # callers never write into it


def _shift_arg(shift, func: str, name: str = "shift") -> int:
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, numbers.Integral):
        raise InvalidInputError(f"nvdla.{func}: {name} must be an int, got {shift!r}")
    if shift < 0:
        raise InvalidInputError(
            f"nvdla.{func}: {name} = {shift} is negative; NVDLA's {name} fields are unsigned "
            "right shifts"
        )
    return int(shift)


def _max_abs(a: np.ndarray) -> int:
    return max(abs(int(a.min())), abs(int(a.max()))) if a.size else 0


def shr(v, shift: int, bits: int):
    """The hardware "truncate" ``SHR(v, s, b)``: divide by ``2^s``, round half away, saturate.

    Expansion: ``saturate(shift_right_round_half_away(v, s), b)``.

    >>> [int(shr(v, 1, 8)) for v in (5, -5, 255, 256, -258, -259)]
    [3, -3, 127, 127, -128, -128]
    """
    if shift == 0:  # no rounding: skip the shift's copy
        return saturate(v, bits)
    return saturate(shift_right_round_half_away(v, shift), bits)


def shr_flag(v, shift: int, bits: int):
    """``SHR`` plus the cmod's saturation flag with the ±1 rule (§1.2).

    Expansion: ``o = shr(v, s, b)``; ``i = shift_right_floor(v, s)``;
    ``flag = not (o - 1 <= i <= o + 1)``.

    >>> [(int(y), bool(f)) for y, f in (shr_flag(v, 0, 8) for v in (127, 128, 129, -129, -130))]
    [(127, False), (127, False), (127, True), (-128, False), (-128, True)]
    """
    o = shr(v, shift, bits)
    i = shift_right_floor(v, shift)
    # Same flag, fewer passes: unsaturated, o = round(v / 2^s) is i or i + 1 (no flag, and
    # lo - 1 <= i <= hi); saturated high, o = hi and i >= hi; saturated low, o = lo and
    # i <= lo - 1. So "i outside [o - 1, o + 1]" is "i outside [lo - 1, hi + 1]".
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return o, (i < lo - 1) | (i > hi + 1)


def converter(x, *, offset: int, scale: int, shift: int, bits: int):
    """NVDLA converter ``y = sat_b(rhaz((x - offset) * scale, shift))`` and its counter flag.

    Expansion: ``shr_flag((x - offset) * scale, shift, bits)``; the product is exact (int64 when
    ``max|x - offset| * |scale| < 2^62``, Python ints otherwise). ``offset`` and ``scale`` are
    the decoded signed register values, ``shift`` the unsigned right shift (seed 001's 5-bit
    *shifter*; the hardware fields are 5 or 6 bits, ``CVT_SHIFT`` is 6). Returns
    ``(y, flag)``; ``flag.sum()`` is what the unit's saturation counter adds (±1 rule).

    >>> y, f = converter(np.array([10, -3, 300]), offset=2, scale=3, shift=1, bits=8)
    >>> y.tolist(), f.tolist()    # (8*3)/2 = 12; (-5*3)/2 = -7.5 -> -8; 894/2 = 447 -> 127
    ([12, -8, 127], [False, False, True])
    """
    shift = _shift_arg(shift, "converter")
    a = _int_array(x, "converter", "x")
    if a.dtype != object and (_max_abs(a) + abs(offset)) * abs(scale) >= _INT64_SAFE:
        a = a.astype(object)
    return shr_flag((a - offset if offset else a) * scale, shift, bits)


def truncate(x, *, lsb: int, bits: int):
    """Seed 001's truncation ``y = saturation_round(x[msb:lsb])``, ``msb = lsb + bits``.

    Expansion: ``shr_flag(x, lsb, bits)`` — drop ``lsb`` bits rounding half away from zero and
    saturate to ``bits``. The flag follows the same ±1 rule as the converters (no status
    register on the page counts truncations; it is returned for uniformity).

    >>> y, f = truncate(np.array([6, -6, 1 << 40]), lsb=2, bits=32)
    >>> y.tolist(), f.tolist()    # 1.5 -> 2, -1.5 -> -2, 2^38 -> INT32_MAX
    ([2, -2, 2147483647], [False, False, True])
    """
    return shr_flag(_int_array(x, "truncate", "x"), _shift_arg(lsb, "truncate", "lsb"), bits)


def shifter(x, *, shift: int, bits: int):
    """Seed 001's shifter ``y = saturate(x << shift)`` to ``bits``; ``flag`` = value changed.

    Expansion: ``shift_left_saturate(x, min(shift, bits - 1), bits)``. Capping the shift at
    ``bits - 1`` is exact: every ``x != 0`` shifted by ``bits - 1`` or more already reaches a
    rail (``-1 << (bits - 1)`` is exactly the minimum).

    >>> y, f = shifter(np.array([3, -3, 1 << 20, -1]), shift=12, bits=32)
    >>> y.tolist(), f.tolist()
    ([12288, -12288, 2147483647, -4096], [False, False, True, False])
    """
    shift = _shift_arg(shift, "shifter")
    a = _int_array(x, "shifter", "x")
    s = min(shift, bits - 1)
    y = shift_left_saturate(a, s, bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    # x << shift stays inside [lo, hi] iff ceil(lo / 2^shift) <= x <= floor(hi / 2^shift)
    # (Python ints: exact for any shift; the uncapped shift, so -1 << bits is counted).
    return y, (a < -((-lo) >> shift)) | (a > hi >> shift)
