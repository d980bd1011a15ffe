"""Binary32 helpers for oneDNN's f32 down-conversion steps (page §1.2).

Every step is a separate IEEE binary32 operation on ``numpy.float32`` values: NumPy evaluates a
float32 ufunc with a single rounding and never fuses a multiply with an add, which is what the
page requires ("no fused multiply-add occurs anywhere").
"""

from __future__ import annotations

import numpy as np

from quantemu.intmath import float32_to_int_round_half_even_saturate
from quantemu.intmath.policies import NanPolicy

_ONE = np.float32(1.0)


def f32(value: float | np.ndarray) -> np.float32 | np.ndarray:
    """``f32(v)``: round to the nearest binary32 value (ties to even)."""
    return np.float32(value) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float32)


def rr(s: float | np.ndarray) -> np.float32 | np.ndarray:
    """``rr(s) = f32(1 / s)`` for a binary32 ``s``: the correctly rounded binary32 reciprocal.

    >>> float(rr(rr(np.float32(0.1)))) == float(np.float32(0.1))
    True
    >>> float(rr(np.float32(3.0)))
    0.3333333432674408
    """
    return _ONE / f32(s)


def to_8bit(
    v: np.ndarray, *, signed: bool, nan: NanPolicy = NanPolicy.X86_INDEFINITE
) -> np.ndarray:
    """``clamp(rne(v), lo, hi)`` of a float32 array as int8/uint8: ``cvtps2dq`` + packs.

    ±inf and values beyond the range saturate; NaN follows ``nan`` (x86: the integer indefinite
    ``-2**31``, saturated to the destination's minimum).
    """
    out = float32_to_int_round_half_even_saturate(
        np.asarray(v, dtype=np.float32), 8, signed=signed, nan=nan
    )
    return np.asarray(out).astype(np.int8 if signed else np.uint8)
