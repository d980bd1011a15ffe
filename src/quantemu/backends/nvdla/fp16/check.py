"""Seed 001's FP16 error thresholds: which NVDLA FP16 results violate them.

FP16 results depend on the order of computation, so NVDLA's verification accepts differences
from a reference within per-module thresholds (seed 001, "FP16 error threshold"):

====================  =========================================================================
CC DC                 ``|a - b| <= 2^(max_exp - 20) * R*S*C * 2 * scale + 2^(exp(a) - 10)``
CC Winograd           ``|a - b| <= 2^(max_exp - 20) * 18*C * 2 * scale + 2^(exp(a) - 10)``
SDP                   bit-for-bit identical
CDP, PDP              ``|a - b| <= 0.0001`` and ``|a - b| / max_value <= 0.001``
====================  =========================================================================

``a`` is NVDLA's fp16 output, ``b`` the reference. ``exp(v) = ((bits(v) >> 10) & 0x1f) - 15``
(the unbiased exponent field, read from the fp16 bit pattern); ``max_exp`` is, per output, the
maximum over the kernel window of ``(exp(data) & ~3) + (exp(wt) & ~3)``; ``max_value`` is the
largest magnitude in the CDP square-sum window or the PDP pooling window (the seed says
"maximum value"; the magnitude keeps the ratio meaningful for negative windows). ``scale`` is
the seed's unexplained factor, a parameter here (default 1). Every function returns a boolean
array: True where the element **violates** its threshold. A NaN in ``a`` or ``b`` violates
(except bit-identical NaNs in the SDP check). The SDP's FP16 datapath is emulated bit for bit
(:mod:`.sdp`); the other units' FP16 datapaths are not.
"""

from __future__ import annotations

import enum

import numpy as np

from quantemu.errors import InvalidInputError

__all__ = [
    "ConvMode",
    "cdp_violations",
    "conv_max_exp",
    "conv_violations",
    "fp16_exponent",
    "pdp_violations",
    "sdp_violations",
]


class ConvMode(enum.Enum):
    """Convolution core mode: the threshold's tap count is R*S*C (DC) or 18*C (Winograd)."""

    DC = "dc"
    WINOGRAD = "winograd"


def _fp16(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype != np.float16:
        raise InvalidInputError(
            f"fp16 check: {name} must be a float16 array (NVDLA's fp16 values), got {a.dtype}; "
            "convert with .astype(np.float16) if the values are fp16-representable"
        )
    return a


def fp16_exponent(x) -> np.ndarray:
    """``exp(v) = ((bits >> 10) & 0x1f) - 15`` of fp16 values (as int64).

    >>> fp16_exponent(np.array([1.0, 0.5, 3.0, 65504.0, 0.0], dtype=np.float16)).tolist()
    [0, -1, 1, 15, -15]
    """
    bits = _fp16(x, "x").view(np.uint16).astype(np.int64)
    return ((bits >> 10) & 0x1F) - 15


def conv_max_exp(data, weights, *, axis: int = -1) -> np.ndarray:
    """``max over taps of (exp(data) & ~3) + (exp(wt) & ~3)``; taps along ``axis``.

    ``data`` and ``weights`` hold, for every output, the window's data and the weights they
    multiply, tap by tap (broadcast against each other).
    """
    d = fp16_exponent(_fp16(data, "data")) & ~3
    w = fp16_exponent(_fp16(weights, "weights")) & ~3
    return np.max(d + w, axis=axis)


def _diff(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _fp16(a, "a"), _fp16(b, "b")
    if a.shape != b.shape:
        raise InvalidInputError(f"fp16 check: a has shape {a.shape}, b has shape {b.shape}")
    af, bf = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        d = np.abs(af - bf)  # exact: fp16 values differ by a double-representable amount
    return d, np.isnan(af) | np.isnan(bf)


def conv_violations(a, b, max_exp, *, mode: ConvMode, taps: int, scale: float = 1.0):
    """CC DC / Winograd check. ``taps`` = R*S*C (DC) or C (Winograd, the formula uses 18*C)."""
    d, nan = _diff(a, b)
    n = taps if mode is ConvMode.DC else 18 * taps
    e = np.asarray(max_exp, dtype=np.float64)
    bound = np.exp2(e - 20) * n * 2 * scale + np.exp2(fp16_exponent(a) - 10.0)
    with np.errstate(invalid="ignore"):
        return nan | ~(d <= bound)


def sdp_violations(a, b) -> np.ndarray:
    """SDP: bit-for-bit identity of the fp16 patterns."""
    a, b = _fp16(a, "a"), _fp16(b, "b")
    if a.shape != b.shape:
        raise InvalidInputError(f"fp16 check: a has shape {a.shape}, b has shape {b.shape}")
    return a.view(np.uint16) != b.view(np.uint16)


def _window_violations(a, b, windows, axis: int) -> np.ndarray:
    d, nan = _diff(a, b)
    w = np.asarray(windows)
    if w.dtype.kind not in "fiu":
        raise InvalidInputError(f"fp16 check: windows must be numeric, got {w.dtype}")
    max_value = np.max(np.abs(w.astype(np.float64)), axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(d == 0, 0.0, d / max_value)
        return nan | ~((d <= 0.0001) & (rel <= 0.001))


def cdp_violations(a, b, windows, *, axis: int = -1) -> np.ndarray:
    """CDP: ``windows`` holds each output's square-sum window values along ``axis``."""
    return _window_violations(a, b, windows, axis)


def pdp_violations(a, b, windows, *, axis: int = -1) -> np.ndarray:
    """PDP: ``windows`` holds each output's pooling window values along ``axis``."""
    return _window_violations(a, b, windows, axis)
