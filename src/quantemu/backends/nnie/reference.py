"""Naive scalar NNIE reference: ``nnie.md`` §3.2 and §4 transcribed on Python floats.

One element at a time, with ``math.log2`` in float64 exactly as the page's pseudo-code. The page
explains why this is exact for every float32 input (powers of two give exact logarithms; other
float32 values stay ``>= 2.6e-8`` away from every decision point in the ``16*log2`` domain, far
beyond float64 rounding). Tests compare it with the vectorized :mod:`.ops`; it is slow on purpose.
"""

from __future__ import annotations

import math

import numpy as np


def clip_offset(clip: float) -> int:
    """``z = round_half_even(16*log2(clip)) - 127`` (Python's ``round`` is half-even)."""
    return round(16.0 * math.log2(clip)) - 127


def quantize_scalar(v: float, clip: float) -> int:
    """The code of one float32 value ``v`` (given as a Python float), per ``nnie.md`` §3.2."""
    if math.isnan(v):
        raise ValueError("NaN input to NNIE log_quantize")
    z = clip_offset(clip)
    if v == 0.0:
        return 0x80
    big = 16.0 * math.log2(abs(v)) if math.isfinite(v) else math.inf
    if v > 0:
        if big < z - 16:
            return 0x80
        return int(min(max(_rint(big) - z, 0), 127))
    if big <= z - 15:
        return 0x80
    return 0x80 | int(min(max(_rint(big) - z, 1), 127))


def _rint(t: float) -> float:
    return t if math.isinf(t) else round(t)


def dequantize_scalar(code: int, clip: float) -> float:
    """The float32 value (as a Python float) of one code, per ``nnie.md`` §4: ``2^((i+z)/16)``
    evaluated in float64 with ``**``, then rounded to float32."""
    z = clip_offset(clip)
    if code == 0x80:
        return 0.0
    i = code & 0x7F
    try:
        level = 2.0 ** ((i + z) / 16)
    except OverflowError:
        level = math.inf
    value = float(np.float32(level)) if level < 2.0**128 else math.inf
    return -value if code & 0x80 else value
