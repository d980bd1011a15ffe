"""MEAN on int8 codes: ``reference_ops::QuantizedMeanOrSum``, which both peers run for every
int8 MEAN (LiteRT 2.3.0's reference kernel and TFLite-Micro; the older TFLite special cases, a
4-D mean over H and W with ``keepdims`` through ``reference_integer_ops::Mean`` and a plain
integer division when input and output share their quantization, are not taken by either:
checked against both interpreters, see README.md)."""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.output import requantize_clamp
from quantemu.backends.tflite.params import MeanParams, TfliteRuntime
from quantemu.errors import InvalidInputError

__all__ = ["mean", "mean_rescaled_multiplier"]


def mean_rescaled_multiplier(multiplier: int, shift: int, count: int) -> tuple[int, int]:
    """``QuantizedMeanOrSum``'s multiplier with ``1 / count`` folded in: ``k = min(floor(log2
    count), 32, 31 + shift)``, ``m' = floor(m * 2**k / count)``, ``s' = shift - k``.

    Policy: the floor drops up to one unit of ``m'`` (TFLite's int64 division of non-negative
    values); ``m' < 2**31`` because ``2**k <= count``.

    >>> mean_rescaled_multiplier(1 << 30, 0, 3)  # 2**30 * 2 // 3, shift -1
    (715827882, -1)
    >>> mean_rescaled_multiplier(1 << 30, -30, 8)  # k = min(3, 32, 1)
    (268435456, -31)
    """
    if count < 1:
        raise InvalidInputError(f"mean_rescaled_multiplier: count {count} must be >= 1")
    k = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << k) // count, shift - k


def mean(x, axes, keepdims: bool, params: MeanParams, *, runtime=None):
    """int8 MEAN over ``axes`` of ``x`` (any layout; the caller maps TFLite's NHWC axes):
    ``(y, counters)``.

    Formula: with ``n`` the number of reduced elements and ``(m', s')`` from
    :func:`mean_rescaled_multiplier`, ``y = sat8(MBQM(sum(x) - z_in * n, m', s') + z_out)``.

    ``runtime`` (a :class:`TfliteRuntime` or None) is accepted so that callers pass it to every
    kernel alike; both runtimes compute this formula.

    Policy: the sum is exact (TFLite's int32 sum holds ``n * 128`` for any realistic tensor);
    two roundings in MBQM (ties up, then away from zero); the fused activation does not exist
    for MEAN, so the only clamp is int8's.

    Mirrors: ``reference_ops::QuantizedMeanOrSum`` (``compute_sum = false``).

    >>> x = np.array([[[[1, 2], [4, 4]]]], np.int8)
    >>> p = MeanParams(0, 0, 1 << 30, 1)  # equal scales
    >>> mean(x, (2, 3), True, p)[0].ravel().tolist()  # 11/4
    [3]
    >>> mean(x, (3,), False, p)[0].tolist()  # 3/2 (tie up), 8/2
    [[[2, 4]]]
    """
    if runtime is not None:
        TfliteRuntime(runtime)  # validated: an unknown runtime is an error
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -128 or arr.max() > 127)):
        raise InvalidInputError(f"tflite mean: x must hold int8 codes, got {arr.dtype}")
    ax = tuple(sorted({int(a) % arr.ndim for a in axes}))
    count = int(np.prod([arr.shape[a] for a in ax])) if ax else 1
    if count == 0:
        raise InvalidInputError(f"tflite mean: the reduced axes {ax} of {arr.shape} are empty")
    total = arr.astype(np.int64).sum(axis=ax, keepdims=keepdims)  # |.| <= 128 * count
    m, s = mean_rescaled_multiplier(params.multiplier, params.shift, count)
    shifted = total - params.input_zero_point * count  # |.| <= 256 * count
    return requantize_clamp(shifted, m, s, params.output_zero_point)
