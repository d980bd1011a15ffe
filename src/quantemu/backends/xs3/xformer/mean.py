"""``XC_mean`` (int8 MEAN over contiguous axes): xcore-opt's parameters, lib_nn's kernel.

xcore-opt 1.4.2 (``ReplaceMean.cpp``) replaces an int8 MEAN whose reduced axes are
contiguous in the TFLite (NHWC) tensor by ``XC_mean``; lib_nn's ``mean_int8`` sums the codes
exactly in int32 and requantizes in **float32** (one multiply by ``s_in / s_out / n``, an
add of the output zero point, ``roundf``), not with TFLite's fixed-point multiplier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError

F32 = np.float32


@dataclass(frozen=True)
class XcMeanParams:
    """``XC_mean``'s float32 options: ``sm`` (scale multiplier), ``i``/``o`` (zero points)."""

    scale_mul: np.float32
    in_zero_point: np.float32
    out_zero_point: np.float32


def xc_mean_params(s_in, zp_in: int, s_out, zp_out: int, count: int) -> XcMeanParams:
    """``sm = float32(double(s_in) / double(s_out) / double(float32(count)))``; the zero
    points as float32.

    Mirrors: ``ReplaceMean.cpp: ReplaceMeanPattern`` (``getScale()`` is the float32 scale
    widened to double; ``static_cast<float>(meanDims)``).

    >>> p = xc_mean_params(0.5, -3, 0.25, 4, 4)
    >>> float(p.scale_mul), float(p.in_zero_point), float(p.out_zero_point)
    (0.5, -3.0, 4.0)
    """
    si, so = float(F32(s_in)), float(F32(s_out))
    if count < 1 or so <= 0 or not (math.isfinite(si) and math.isfinite(so)):
        raise InvalidInputError(
            f"XC_mean: needs finite scales, s_out > 0 and count >= 1, got {s_in}, {s_out}, {count}"
        )
    sm = F32(si / so / float(F32(count)))
    return XcMeanParams(scale_mul=sm, in_zero_point=F32(zp_in), out_zero_point=F32(zp_out))


def round_half_away_float(q: np.ndarray) -> np.ndarray:
    """C ``roundf`` on float32 values, exactly (the fraction is taken in float64).

    >>> round_half_away_float(np.float32([0.5, -0.5, 2.4999998, -126.5])).tolist()
    [1.0, -1.0, 2.0, -127.0]
    """
    v = np.asarray(q, np.float64)
    t = np.trunc(v)
    frac = v - t
    return t + (frac >= 0.5) - (frac <= -0.5)


def mean_int8(x, axes, keepdims: bool, params: XcMeanParams) -> np.ndarray:
    """lib_nn's ``mean_int8`` over ``axes`` of int8 codes ``x``.

    Formula: ``start = int32(float32(-i * float32(n)))`` (``n``: the number of reduced
    elements), ``acc = start + sum(x)`` (int32, exact), ``q = float32(float32(float32(acc) *
    sm) + o)``, clamped to ``[-128.0, 127.0]``, ``y = roundf(q)``.

    Policy: each float32 operation rounds to nearest even (x86-64 SSE, no fused multiply-add);
    ``roundf`` ties away from zero; ``float32(acc)`` rounds for ``|acc| > 2**24``, as the C.

    Mirrors: ``lib_nn/src/c/mean.c: mean_int8``. The kernel walks a ``(start, mean, end)``
    view of the tensor; summing over ``axes`` of any layout gives the same exact sums.

    >>> p = xc_mean_params(1.0, 0, 1.0, 0, 4)
    >>> mean_int8(np.array([[1, 2, 4, 3], [-1, -2, -1, -2]], np.int8), (1,), False, p).tolist()
    [3, -2]
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -128 or arr.max() > 127)):
        raise InvalidInputError(f"XC_mean: x must hold int8 codes, got {arr.dtype}")
    ax = tuple(sorted({int(a) % arr.ndim for a in axes})) if arr.ndim else ()
    count = int(np.prod([arr.shape[a] for a in ax])) if ax else 1
    if count == 0:
        raise InvalidInputError(f"XC_mean: the reduced axes {ax} of {arr.shape} are empty")
    start = int(F32(-params.in_zero_point) * F32(count))  # C truncates float -> int32
    acc = start + arr.astype(np.int64).sum(axis=ax, keepdims=keepdims)
    q = acc.astype(F32) * F32(params.scale_mul) + F32(params.out_zero_point)
    q = np.clip(np.asarray(q, F32), F32(-128.0), F32(127.0))
    return round_half_away_float(q).astype(np.int8)


__all__ = ["XcMeanParams", "mean_int8", "round_half_away_float", "xc_mean_params"]
