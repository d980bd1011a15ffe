"""``XC_add`` (int8 ADD and SUB): xcore-opt's compile-time multipliers and lib_nn's kernel.

xcore-opt 1.4.2 rewrites every int8 ADD/SUB (``ReplaceAddSub.cpp: replaceAddorSub``) into
``y = clamp((bias + x1*m1 + x2*m2 + 2**(shift-1)) >> shift)``, with ``m1``, ``m2``, ``bias``
and ``shift`` derived in double precision from the scales. A fused activation was split out
before (``TFLPatterns.td``): RELU/RELU6 become ``XC_lookup`` on the output's quantization.
An operand of another shape was broadcast first (``XC_broadcast``, a byte copy), so the
kernel only ever sees operands of the output's shape; NumPy broadcasting gives the same codes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.elementwise import int8_operands
from quantemu.backends.xs3.xformer.lookup import c_round_half_away
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import shift_right_floor

_ACC_LIMIT = (1 << 31) - 1  # the VPU's symmetric 32-bit accumulator rail


@dataclass(frozen=True)
class XcAddParams:
    """``XC_add``'s custom options: ``m1``, ``m2`` (int16), ``bias`` (int32), ``shift``."""

    m1: int
    m2: int
    bias: int
    shift: int


def xc_add_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s1, zp1, s2, zp2, s_out, zp_out, *, subtract: bool = False
) -> XcAddParams:
    """xcore-opt's ``XC_add`` parameters for ``y = x1 + x2`` (``x1 - x2`` with ``subtract``).

    Formula (double): ``r_i = s_i / s_out``, ``shift = floor(log2(2**14 / max(r1, r2)))``,
    ``r2`` negated for SUB, ``m_i = round(r_i * 2**shift)``, ``bias = round((zp_out - zp1*r1 -
    zp2*r2) * 2**shift)``; ``round`` is C's (ties away from zero).

    Policy: parameters for which the kernel could leave exact integer arithmetic (a
    ``shift`` outside ``[1, 31]``, or ``|bias| + 128(|m1| + |m2|) + 2**(shift-1)`` reaching
    the 32-bit rail, where lib_nn's vector body saturates and its scalar tail wraps) raise
    :class:`UnsupportedError`: the scales are then more than ``2**13`` apart.

    Mirrors: ``ReplaceAddSub.cpp: replaceAddorSub``; the int16 casts of ``xcore_add.cc``.

    >>> xc_add_params(0.5, 0, 0.25, 0, 1.0, 0)
    XcAddParams(m1=16384, m2=8192, bias=0, shift=15)
    >>> xc_add_params(0.5, 2, 0.5, 2, 1.0, -1, subtract=True)
    XcAddParams(m1=16384, m2=-16384, bias=-32768, shift=15)
    """
    s1, s2, so = (float(np.float32(s)) for s in (s1, s2, s_out))
    if min(s1, s2, so) <= 0 or not all(math.isfinite(s) for s in (s1, s2, so)):
        raise InvalidInputError(f"XC_add: scales must be finite and > 0, got {s1}, {s2}, {so}")
    r1, r2 = s1 / so, s2 / so
    shift = math.floor(math.log2(2.0**14 / max(r1, r2)))
    if subtract:
        r2 = -r2
    scale = 2.0**shift
    m1 = int(c_round_half_away(r1 * scale))
    m2 = int(c_round_half_away(r2 * scale))
    bias = int(c_round_half_away((int(zp_out) - int(zp1) * r1 - int(zp2) * r2) * scale))
    params = XcAddParams(m1=m1, m2=m2, bias=bias, shift=shift)
    reach = abs(bias) + 128 * (abs(m1) + abs(m2)) + (1 << max(shift - 1, 0))
    if not 1 <= shift <= 31 or reach > _ACC_LIMIT:
        raise UnsupportedError(
            f"XC_add with scales {s1}, {s2} -> {so} gives {params}: the kernel would leave "
            "exact 32-bit arithmetic (scales more than 2**13 apart); requantize an operand first"
        )
    return params


def add_elementwise_int8(x1, x2, params: XcAddParams) -> np.ndarray:
    """lib_nn's ``add_elementwise``: ``y = clamp((bias + x1*m1 + x2*m2 + 2**(shift-1)) >>
    shift, -128, 127)`` on int8 codes (operands broadcast as NumPy does).

    Policy: round half up (an arithmetic shift after adding half); the sum is exact (the
    parameters guarantee it stays inside the 32-bit accumulator); -128 is reachable (the
    kernel's VLSAT_FIXED and scalar tail both clamp asymmetrically).

    Mirrors: ``add_elementwise_ref`` (VLMACC S8 -> int16, VLMACC S16 with ``m1``/``m2`` onto
    the bias, VLSAT_FIXED by ``shift``; the same formula on its scalar tail).

    >>> p = XcAddParams(m1=16384, m2=8192, bias=0, shift=15)  # x1/2 + x2/4
    >>> add_elementwise_int8(np.array([1, 3, -3, 127]), np.array([2, 2, 2, 127]), p).tolist()
    [1, 2, -1, 95]
    """
    a, b = int8_operands(x1, x2, "XC_add")
    half = 1 << (params.shift - 1)
    reach = abs(params.bias) + 128 * (abs(params.m1) + abs(params.m2)) + half
    if not 1 <= params.shift <= 31 or reach > _ACC_LIMIT:  # parameters xc_add_params refuses
        acc = params.bias + a.astype(np.int64) * params.m1 + b.astype(np.int64) * params.m2 + half
        return np.clip(shift_right_floor(acc, params.shift), -128, 127).astype(np.int8)
    # int32 in place: every partial sum is at most ``reach`` in magnitude
    pa = np.multiply(a, np.int32(params.m1), dtype=np.int32)
    pb = np.multiply(b, np.int32(params.m2), dtype=np.int32)
    acc = np.add(pa, pb, out=pa if pa.shape == np.broadcast_shapes(pa.shape, pb.shape) else None)
    np.add(acc, np.int32(params.bias + half), out=acc)
    np.right_shift(acc, params.shift, out=acc)  # an arithmetic shift: floor
    y = np.empty(acc.shape, np.int8)
    np.clip(acc, -128, 127, out=y, casting="unsafe")
    return y


__all__ = ["XcAddParams", "add_elementwise_int8", "xc_add_params"]
