"""The output stage every int8 TFLite kernel ends with: a requantizing multiply, the output
offset, and the clamp to the fused activation's range, with counters for what the clamp did."""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.params import MultiplierRounding
from quantemu.intmath import (
    multiply_by_quantized_multiplier_double_rounding,
    multiply_shift_right_round_half_up,
)

__all__ = ["clamp_count", "requantize_clamp"]

INT8_MIN, INT8_MAX = -128, 127


def clamp_count(
    v: np.ndarray,
    act_min: int,
    act_max: int,
    *,
    floor: bool | None = None,
    ceiling: bool | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """``clamp(v, act_min, act_max)`` as int8, and how often each kind of clamp struck.

    Formula: ``min(max(v, act_min), act_max)``. Counters: a value clamped at a bound the fused
    activation set (``act_min > -128`` or ``act_max < 127``) is ``activation_clamped`` (the
    activation would clamp it anyway: nothing is lost); a value clamped at an int8 rail the
    activation left alone is ``output_saturated``. ``floor`` / ``ceiling`` say whether a fused
    activation set ``act_min`` / ``act_max`` when that cannot be read off the bounds (a ReLU
    whose zero is the -128 rail); by default a bound inside int8 is the activation's.

    Mirrors: the last two lines of every TFLite int8 reference kernel
    (``std::min(act_max, std::max(act_min, raw))``).

    >>> y, c = clamp_count(np.array([-300, -5, 0, 200]), -10, 127)
    >>> y.tolist(), c
    ([-10, -5, 0, 127], {'output_saturated': 1, 'activation_clamped': 1})
    """
    low, high = v < act_min, v > act_max
    n_low, n_high = int(np.count_nonzero(low)), int(np.count_nonzero(high))
    floor = act_min > INT8_MIN if floor is None else floor
    ceiling = act_max < INT8_MAX if ceiling is None else ceiling
    by_act = (n_low if floor else 0) + (n_high if ceiling else 0)
    counters = {"output_saturated": n_low + n_high - by_act, "activation_clamped": by_act}
    return np.clip(v, act_min, act_max).astype(np.int8), counters


def requantize_clamp(
    acc,
    multiplier,
    shift,
    output_offset: int,
    *,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: MultiplierRounding = MultiplierRounding.DOUBLE,
    floor: bool | None = None,
    ceiling: bool | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """``clamp(MBQM(acc, m, s) + output_offset)``: see :func:`clamp_count`. ``multiplier`` /
    ``shift`` broadcast against ``acc`` (per channel). ``rounding``: DOUBLE is
    :func:`~quantemu.intmath.multiply_by_quantized_multiplier_double_rounding`;
    SINGLE_HALF_UP is ``multiply_shift_right_round_half_up(acc, m, 31 - s)``, exact."""
    if MultiplierRounding(rounding) is MultiplierRounding.DOUBLE:
        raw = multiply_by_quantized_multiplier_double_rounding(acc, multiplier, shift)
    else:
        raw = multiply_shift_right_round_half_up(acc, multiplier, 31 - np.asarray(shift))
    out = np.asarray(raw, dtype=np.int64) + output_offset
    return clamp_count(out, act_min, act_max, floor=floor, ceiling=ceiling)


def merge(*counters: dict[str, int]) -> dict[str, int]:
    """Counters summed key by key."""
    out: dict[str, int] = {}
    for c in counters:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out
