"""lib_nn's int8 output transform at run time: int32 accumulators to int8, as the VPU does it.

Group (``output_transform_fn_impl``) and channelwise (``output_transform_fn_int_channelwise_impl``)
in the S16 VPU mode: VLSAT, VLMUL (shift 14, XS3A), VLADD, VLASHR by ``final_shr``, VDEPTH8 with
asymmetric rounding. ``SAT16`` is the VPU's symmetric ``[-32767, 32767]``. Accumulators arrive
exact (int64) and are first saturated symmetrically to 32 bits, as the VLMACC(R) chain does.
Channels are on the last axis; per-channel parameters broadcast against it.
"""

from __future__ import annotations

import enum

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath import (
    saturate,
    saturate_symmetric,
    shift_right_floor,
    shift_right_round_half_up,
    wrap,
)


class VlashrRounding(enum.Enum):
    """How VLASHR treats a positive shift.

    ``HOST``: ``(t + 2**(s-1)) >> s``, what lib_nn's simulator and the 1.4.2 host interpreter
    do (checked bit for bit). ``DEVICE_TRUNCATE``: ``t >> s``, what lib_xcore_math's scalar VPU
    model does; whether XS3 silicon rounds is UNVERIFIED (``notes/xformer.md`` section 2).
    """

    HOST = "host"
    DEVICE_TRUNCATE = "device_truncate"


def saturate_acc32(acc):
    """``SAT32``: the accumulator's symmetric clamp to ``[-(2**31 - 1), 2**31 - 1]``.

    >>> saturate_acc32(np.array([-2**31, 2**31, 5])).tolist()
    [-2147483647, 2147483647, 5]
    """
    return saturate_symmetric(acc, 32)


def vlsat(acc, shift):
    """``VLSAT``: ``SAT16((acc + 2**(s-1)) >> s)`` for ``s > 0``, ``SAT16(acc)`` for ``s == 0``.

    Ties toward +inf; the rounding add is exact here (the C adds in int32, which could only wrap
    for an accumulator within ``2**(s-1)`` of the rail, i.e. after ~131k taps).

    >>> vlsat(np.array([5, -5, 40000, -40000, 7]), np.array([1, 1, 0, 0, 0])).tolist()
    [3, -2, 32767, -32767, 7]
    """
    return saturate_symmetric(shift_right_round_half_up(acc, np.asarray(shift, np.int64)), 16)


def vlashr(t, shift, rounding: VlashrRounding = VlashrRounding.HOST):
    """``VLASHR`` on int16 lanes: ``s >= 15`` gives the sign (-1 or 0); ``0 < s < 15`` a right
    shift (rounding ties toward +inf on HOST, floor on DEVICE_TRUNCATE); ``s <= 0`` a left
    shift wrapping in 32 bits; then ``SAT16``.

    >>> vlashr(np.array([5, -5, -3, 300, 3]), np.array([1, 1, 20, -8, 0])).tolist()
    [3, -2, -1, 32767, 3]
    >>> vlashr(np.array([5, -5]), 1, VlashrRounding.DEVICE_TRUNCATE).tolist()
    [2, -3]
    """
    t = np.asarray(t, np.int64)
    if np.ndim(shift) == 0:  # one shift for every lane (the OT's final_shr): one branch
        return _vlashr_scalar(t, int(shift), rounding)
    s = np.broadcast_to(np.asarray(shift, np.int64), t.shape)
    mid = np.clip(s, 1, 14)
    if rounding is VlashrRounding.HOST:
        right = shift_right_round_half_up(t, mid)
    else:
        right = shift_right_floor(t, mid)
    # the C shifts a uint64 and keeps the low 32 bits: shifts of 32..63 give 0
    left = wrap(np.left_shift(t, np.clip(-s, 0, 63)), 32)
    sign = np.where(t < 0, -1, 0)
    out = np.where(s >= 15, sign, np.where(s > 0, right, left))
    return saturate_symmetric(out, 16)


def _vlashr_scalar(t: np.ndarray, s: int, rounding: VlashrRounding) -> np.ndarray:
    """:func:`vlashr` with one shift ``s``: only its branch is computed."""
    if s >= 15:
        return np.where(t < 0, -1, 0).astype(np.int64)
    if s > 0:
        if rounding is VlashrRounding.HOST:
            return saturate_symmetric(shift_right_round_half_up(t, s), 16)
        return saturate_symmetric(shift_right_floor(t, s), 16)
    # the C shifts a uint64 and keeps the low 32 bits: shifts of 32..63 give 0
    return saturate_symmetric(wrap(np.left_shift(t, min(-s, 63)), 32), 16)


def vlmul(t, mul):
    """``VLMUL`` (S16, XS3A): ``SAT16((t * mul + 2**13) >> 14)``, ties toward +inf.

    >>> vlmul(np.array([16384, -3, 32767]), np.array([3, 8192, 32767])).tolist()
    [3, -1, 32767]
    """
    return saturate_symmetric(
        shift_right_round_half_up(np.multiply(t, mul, dtype=np.int64), 14), 16
    )


def vladd(t, bias):
    """``VLADD`` (S16): ``SAT16(t + bias)``.

    >>> vladd(np.array([32767, -32767]), np.array([1, -1])).tolist()
    [32767, -32767]
    """
    return saturate_symmetric(np.add(t, bias, dtype=np.int64), 16)


def vdepth8_fixed(t):
    """lib_nn's ``VDEPTH8_FIXED``: ``clamp((t + 128) >> 8, -128, 127)``; asymmetric, so -128
    is reachable (the XS3 assembly gets the same result with vladd/vdepth1).

    >>> vdepth8_fixed(np.array([-32767, -32641, -32640, 127, 128, 32767])).tolist()
    [-128, -128, -127, 0, 1, 127]
    """
    return saturate(shift_right_round_half_up(t, 8), 8)


def _tail(t, mul, bias, final_shr, rounding):
    t = vladd(vlmul(t, mul), bias)
    return vdepth8_fixed(vlashr(t, int(final_shr), rounding)).astype(np.int8)


def _sat32(acc, acc_bound: int | None) -> np.ndarray:
    """SAT32, skipped when ``acc_bound`` (a proven bound on ``|acc|``) shows it cannot strike."""
    acc = np.asarray(acc, np.int64)
    return acc if acc_bound is not None and acc_bound <= 2**31 - 1 else saturate_acc32(acc)


def ot_group(
    acc,
    mul,
    bias,
    initial_shr: int,
    final_shr: int,
    *,
    rounding=VlashrRounding.HOST,
    acc_bound: int | None = None,
):
    """The group OT: ``initial_shr > 0``: VLSAT by it; else VLSAT by 0 then VLASHR left by
    ``-initial_shr`` (saturating); then VLMUL, VLADD, VLASHR ``final_shr``, VDEPTH8.

    >>> ot_group(np.array([[1000, -1000]]), np.array([16384, 16384]), np.array([-1, -1]), 2, 0)
    array([[ 1, -1]], dtype=int8)
    """
    acc = _sat32(acc, acc_bound)
    ishr = int(initial_shr)
    # a non-positive initial shift is a saturating left VLASHR after an unshifted VLSAT
    t = vlsat(acc, ishr) if ishr > 0 else vlashr(vlsat(acc, 0), ishr, VlashrRounding.HOST)
    return _tail(t, mul, bias, final_shr, rounding)


def ot_channelwise(
    acc,
    shift,
    mul,
    bias,
    final_shr: int,
    *,
    rounding=VlashrRounding.HOST,
    acc_bound: int | None = None,
):
    """The channelwise OT: VLSAT by ``shift[c] >= 0``, VLMUL, VLADD, VLASHR, VDEPTH8.

    >>> ot_channelwise(np.array([[1000, 1000]]), np.array([2, 3]), np.array([16384, 16384]),
    ...                np.array([0, 0]), 0)
    array([[1, 0]], dtype=int8)
    """
    shift = np.asarray(shift, np.int64)
    if np.any(shift < 0):
        raise InvalidInputError(f"channelwise VLSAT shifts must be >= 0, got {shift.min()}")
    t = vlsat(_sat32(acc, acc_bound), shift)
    return _tail(t, mul, bias, final_shr, rounding)
