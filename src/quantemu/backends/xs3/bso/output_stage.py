"""The per-channel output stages: BSO (shift1, scale, offset, shift2) and the legacy Q1.14 one.

Notation of ``xs3.md`` section 4: ``RSHR`` is a rounding right shift with ties toward +inf;
``RSHR_W`` is the same with the rounding add done in int32, where it wraps (the x86 reference
adds ``2^(s-1)`` to an ``int32_t``); ``SAT_b`` is symmetric saturation. Which stages wrap
depends on the operator (section 5) and on the :class:`~quantemu.backends.xs3.bso.params.Model`:
the device's VLSAT rounding add is taken not to wrap.

Bounds (int64 throughout): ``|acc| <= 2^31`` and the rounding constant ``<= 2^30``, so
``acc + 2^(s-1)`` fits; ``|r| <= 2^15 - 1`` and every BSO field ``<= 2^15`` in magnitude, so
``|a2| = |r*scale + offset_scale*offset| <= (2^15-1)*2^15 + 2^30 < 2^31``.
"""

from __future__ import annotations

import enum

import numpy as np

from quantemu.backends.xs3.bso.packing import BsoChannels
from quantemu.backends.xs3.bso.params import Model
from quantemu.intmath import (
    saturate_count,
    saturate_symmetric,
    saturate_symmetric_count,
    shift_right_round_half_up,
    shift_right_round_half_up_wrapping_add_count,
)


class LastStep(enum.Enum):
    """The last step of the BSO stage, which differs by operator (``xs3.md`` section 5).

    ``INT8_WRAPPING``: ``CLAMP(RSHR_W(a2, shift2), lo, 127)`` (conv2d_deep, conv2d_shallowin).
    ``INT8_EXACT``: ``CLAMP(RSHR(a2, shift2), lo, 127)``, the C does the rounding add in 64 bits
    (conv2d_1x1, conv2d_depthwise, fully_connected_8).
    ``INT16_WRAPPING``: ``SAT_16(RSHR_W(a2, shift2))`` (fully_connected_16).
    """

    INT8_WRAPPING = "int8_wrapping"
    INT8_EXACT = "int8_exact"
    INT16_WRAPPING = "int16_wrapping"


def rshr(v, s):
    """``RSHR(v, s)``: ``floor((v + 2^(s-1)) / 2^s)`` for ``s >= 1``, ``v`` for ``s == 0``.

    Exact (no wrap); ties toward +inf, so negative values do round to 0.

    >>> [rshr(5, 1), rshr(-5, 1), rshr(-8, 4), rshr(-9, 4), rshr(7, 0)]
    [3, -2, 0, -1, 7]
    """
    return shift_right_round_half_up(v, s)


def rshr_wrapping(v, s):
    """``RSHR_W(v, s)``: :func:`~quantemu.intmath.shift_right_round_half_up_wrapping_add_count`
    at 32 bits, ``(floor(WRAP32(v + 2^(s-1)) / 2^s), wrapped)``.

    ``wrapped`` marks where ``v + 2^(s-1) > 2^31 - 1`` made the sum wrap negative (the x86
    reference's artifact). Shift 0 adds nothing, so nothing wraps.

    >>> y, w = rshr_wrapping(np.array([2**31 - 1, 2**31 - 32768, 5]), np.array([3, 16, 1]))
    >>> y.tolist(), w.tolist()
    ([-268435456, -32768, 3], [True, True, False])
    """
    return shift_right_round_half_up_wrapping_add_count(v, s, bits=32)


def _rshr_model(v, s, wraps: bool, model: Model):
    """``RSHR_W`` where the host wraps, ``RSHR`` on the device (VLSAT does not wrap)."""
    if wraps and model is Model.HOST_REFERENCE:
        return rshr_wrapping(v, s)
    return rshr(v, s), np.zeros(np.shape(v), dtype=bool)


def bso_stage(
    acc: np.ndarray, ch: BsoChannels, last: LastStep, low: int, model: Model, *, raw=False
):
    """Apply the BSO output stage to int32 accumulators ``acc`` (channels on the last axis).

    ``r = SAT_16(RSHR_W(acc, shift1))``, ``a2 = r*scale + offset_scale*offset``, then the last
    step of ``last`` with int8 lower bound ``low`` (-128, or -127 with symmetric saturation).
    Returns ``(y, counters)``: ``y`` int8 (int16 for ``INT16_WRAPPING``) and a dict of counts:
    ``shift1_saturated``, ``output_saturated``, ``rounding_wrapped`` (outputs where a rounding
    add wrapped, host only). With ``raw=True``, ``(y, counters, y_raw)``: ``y_raw`` is the int64
    value of the last step before its final clamp (which side a saturation struck).
    """
    r_raw, wrapped1 = _rshr_model(acc, ch.shift1, True, model)
    r, n_sat16 = saturate_symmetric_count(r_raw, 16)
    # |a2| < 2^31 (module docstring), exact in int64.
    a2 = r * ch.scale + ch.offset_scale * ch.offset
    wraps2 = last is not LastStep.INT8_EXACT
    y_raw, wrapped2 = _rshr_model(a2, ch.shift2, wraps2, model)
    if last is LastStep.INT16_WRAPPING:
        y, n_out = saturate_symmetric_count(y_raw, 16)
        y = y.astype(np.int16)
    else:
        # CLAMP(v, lo, 127): two's-complement int8 bounds, or the symmetric ones.
        sat = saturate_symmetric_count if low == -127 else saturate_count
        y, n_out = sat(y_raw, 8)
        y = y.astype(np.int8)
    counters = {
        "shift1_saturated": int(n_sat16),
        "output_saturated": int(n_out),
        "rounding_wrapped": int(np.count_nonzero(wrapped1 | wrapped2)),
    }
    return (y, counters, y_raw) if raw else (y, counters)


def legacy_stage(acc: np.ndarray, shifts, scales, out_bits: int, model: Model):
    """The legacy ``fc_deepin_shallowout_*`` stage (``xs3.md`` section 5, lib_nn Note 4).

    ``r = SAT_16(RSHR_W(acc, shift))``, ``y16 = SAT_16(RSHR(r*scale, 14))`` (a Q1.14 multiply;
    ``|r*scale| <= 2^30`` cannot wrap), and for 8-bit outputs ``SAT_8(RSHR(y16, 8))``, always
    symmetric. Returns ``(y, counters)`` like :func:`bso_stage`.
    """
    r_raw, wrapped = _rshr_model(acc, shifts, True, model)
    r, n_sat16 = saturate_symmetric_count(r_raw, 16)
    y16_raw = rshr(r * scales, 14)
    y16 = saturate_symmetric(y16_raw, 16)
    clamped = y16 != y16_raw
    if out_bits == 16:
        y = y16.astype(np.int16)
    else:
        y8_raw = rshr(y16, 8)
        y8 = saturate_symmetric(y8_raw, 8)
        clamped |= y8 != y8_raw
        y = y8.astype(np.int8)
    counters = {
        "shift1_saturated": int(n_sat16),
        "output_saturated": int(np.count_nonzero(clamped)),
        "rounding_wrapped": int(np.count_nonzero(wrapped)),
    }
    return y, counters
