"""QUANTIZE (int8 -> int8 and float32 -> int8), DEQUANTIZE, CONCATENATION and PAD."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.backends.tflite.output import clamp_count, merge, requantize_clamp
from quantemu.backends.tflite.params import RequantizeParams
from quantemu.errors import InvalidInputError

__all__ = ["concatenation", "dequantize", "pad", "quantize_float", "requantize"]


def _codes(x, where: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -128 or arr.max() > 127)):
        raise InvalidInputError(f"{where}: x must hold int8 codes, got {arr.dtype}")
    return arr


def requantize(x, params: RequantizeParams):
    """int8 -> int8 QUANTIZE: ``y = sat8(MBQM(x - z_in, m, s) + z_out)``: ``(y, counters)``.

    Mirrors: ``reference_ops::Requantize`` (equal scales give ``m = 2**30, s = 1``, an exact
    identity on ``x - z_in``).

    >>> requantize(np.array([-128, 0, 5, 127]), RequantizeParams(1, 0, 1 << 30, 0))[0].tolist()
    [-64, 0, 2, 63]
    """
    a = _codes(x, "tflite requantize").astype(np.int64)
    return requantize_clamp(
        a - params.input_zero_point,
        params.multiplier,
        params.shift,
        params.output_zero_point,
    )


def quantize_float(x, scale, zero_point: int):
    """float32 -> int8 QUANTIZE: ``y = sat8(round(x / scale) + zero_point)``.

    Policy: the division in float32 (correctly rounded), ``round`` half away from zero
    (``TfLiteRound``); NaN is an error (undefined in TFLite's C++), infinities saturate.

    Mirrors: ``reference_ops::AffineQuantize``.

    >>> quantize_float(np.array([0.25, -0.25, 0.75, 1e9], np.float32), 0.5, -1)[0].tolist()
    [0, -2, 1, 127]
    """
    xf = np.asarray(x, dtype=np.float32)
    if np.isnan(xf).any():
        raise InvalidInputError("tflite quantize_float: x holds NaN; TFLite's result is undefined")
    q = xf / np.float32(scale)  # float32 / float32: one IEEE rounding
    wide = q.astype(np.float64)  # exact; +-0.5 on a float32 value is exact in double
    r = np.trunc(np.where(wide >= 0, wide + 0.5, wide - 0.5))
    r = np.clip(r, -(2.0**40), 2.0**40).astype(np.int64)  # beyond int8 either way
    return clamp_count(r + int(zero_point), -128, 127)


def dequantize(x, scale, zero_point: int) -> np.ndarray:
    """int8 -> float32 DEQUANTIZE: ``float32(double(scale) * (x - zero_point))``.

    Policy: the double product is exact (24-bit by 9-bit significands), so the one rounding is
    the cast to float32 (nearest, ties to even). Mirrors: ``reference_ops::Dequantize``.

    >>> dequantize(np.array([-128, 0, 127]), 0.5, -1).tolist()
    [-63.5, 0.5, 64.0]
    """
    a = _codes(x, "tflite dequantize").astype(np.int64)
    return (float(np.float32(scale)) * (a - int(zero_point))).astype(np.float32)


def concatenation(inputs: Sequence, axis: int, params: Sequence[RequantizeParams | None]):
    """int8 CONCATENATION: ``(y, counters)``. TFLite's int8 kernel requires every input to share
    the output's quantization (its converter makes them so, inserting QUANTIZE ops where needed);
    a ``params[i]`` that is not None stands for such a QUANTIZE (:func:`requantize`) before
    the copy, and None (or equal quantization) for a plain copy.

    Mirrors: ``reference_ops::Concatenation`` (after ``reference_ops::Requantize``).

    >>> halve = RequantizeParams(0, 0, 1 << 30, 0)
    >>> y, _ = concatenation([np.array([[1]]), np.array([[4]])], 1, [None, halve])
    >>> y.tolist()
    [[1, 2]]
    """
    if len(inputs) != len(params) or not inputs:
        raise InvalidInputError(
            f"tflite concatenation: {len(inputs)} inputs and {len(params)} parameter sets"
        )
    parts, counters = [], []
    for x, p in zip(inputs, params, strict=True):
        a = _codes(x, "tflite concatenation")
        if p is not None and not p.same_quantization:
            a, c = requantize(a, p)
            counters.append(c)
        parts.append(a.astype(np.int8))
    zero = {"output_saturated": 0, "activation_clamped": 0}
    return np.concatenate(parts, axis=axis), merge(zero, *counters)


def pad(x, pads: Sequence[tuple[int, int]], zero_point: int) -> np.ndarray:
    """int8 PAD: ``x`` with ``pads[d] = (before, after)`` elements of ``zero_point`` on axis
    ``d`` (TFLite pads quantized tensors with the output zero point when no constant is
    given). Mirrors: ``reference_ops::Pad``.

    >>> pad(np.array([[1, 2]], np.int8), [(0, 1), (1, 0)], -3).tolist()
    [[-3, 1, 2], [-3, -3, -3]]
    """
    a = _codes(x, "tflite pad")
    if len(pads) != a.ndim or any(b < 0 or e < 0 for b, e in pads):
        raise InvalidInputError(
            f"tflite pad: pads {pads!r} must be {a.ndim} non-negative (before, after) pairs"
        )
    return np.pad(a.astype(np.int8), pads, constant_values=int(zero_point))
