"""MAX_POOL_2D and AVERAGE_POOL_2D on int8 NCHW codes; windows skip the taps outside the image
(TFLite's reference loops clip the window to the image), so padding neither wins a max nor
counts in an average."""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.output import clamp_count
from quantemu.backends.tflite.params import PoolParams
from quantemu.errors import InvalidInputError
from quantemu.intmath import sliding_windows

__all__ = ["average_pool2d", "max_pool2d"]

_BELOW_INT8 = -(2**15)  # a pad value no int8 code loses a max to


def _input(x, where: str) -> np.ndarray:
    arr = np.asarray(x)
    if (
        arr.ndim != 4
        or arr.dtype.kind not in "iu"
        or (arr.size and (arr.min() < -128 or arr.max() > 127))
    ):
        raise InvalidInputError(f"{where}: x must be NCHW int8 codes, got {arr.shape} {arr.dtype}")
    return arr


def max_pool2d(x, kernel, params: PoolParams, *, strides=(1, 1), pads=(0,) * 4):
    """int8 MAX_POOL_2D: ``(y, counters)``.

    Formula: ``y = clamp(max over the in-image taps, act_min, act_max)``.

    Policy: no arithmetic beyond the max; a window with no tap inside the image is an error
    (TFLite's padding never makes one). Mirrors: ``reference_integer_ops::MaxPool``.

    >>> x = np.array([[[[1, -5, 2], [0, 3, -1]]]], np.int8)
    >>> max_pool2d(x, (2, 2), PoolParams(), strides=(2, 2), pads=(0, 0, 0, 1))[0].tolist()
    [[[[3, 2]]]]
    """
    where = "tflite max_pool2d"
    x = _input(x, where)
    win = sliding_windows(
        x.astype(np.int16), kernel, strides=strides, pads=pads, pad_value=_BELOW_INT8
    )
    # A running maximum over the taps: each step a whole-tensor np.maximum on strided views,
    # much faster than one reduction over the two small window axes.
    best = win[..., 0, 0].copy()
    for r in range(win.shape[-2]):
        for c in range(win.shape[-1]):
            np.maximum(best, win[..., r, c], out=best)
    if best.size and best.min() == _BELOW_INT8:
        raise InvalidInputError(f"{where}: a window lies wholly in the padding (pads {pads})")
    return clamp_count(
        best, params.act_min, params.act_max, floor=params.floor, ceiling=params.ceiling
    )


def average_pool2d(x, kernel, params: PoolParams, *, strides=(1, 1), pads=(0,) * 4):
    """int8 AVERAGE_POOL_2D: ``(y, counters)``.

    Formula: ``acc`` = the sum of the codes of the in-image taps, ``n`` their count; ``y =
    clamp(trunc((acc + n // 2) / n) if acc > 0 else trunc((acc - n // 2) / n))``: round half
    away from zero (C's truncating ``/``), on the raw codes (zero points cancel, input and
    output share them).

    Mirrors: ``reference_integer_ops::AveragePool``.

    >>> x = np.array([[[[1, 2], [-3, -4]]]], np.int8)  # rows average 1.5 and -3.5
    >>> average_pool2d(x, (1, 2), PoolParams())[0].ravel().tolist()
    [2, -4]
    >>> y, _ = average_pool2d(x, (2, 2), PoolParams(), pads=(0, 0, 1, 1))
    >>> y.ravel().tolist()  # -4/4, -2/2, -7/2 (half away), -4/1
    [-1, -1, -4, -4]
    """
    where = "tflite average_pool2d"
    x = _input(x, where)
    acc = sliding_windows(x.astype(np.int64), kernel, strides=strides, pads=pads).sum(axis=(-2, -1))
    ones = np.ones((1, 1, *x.shape[2:]), np.int64)
    n = sliding_windows(ones, kernel, strides=strides, pads=pads).sum(axis=(-2, -1))
    if n.size and n.min() == 0:
        raise InvalidInputError(f"{where}: a window lies wholly in the padding (pads {pads})")
    half = n // 2
    num = np.where(acc > 0, acc + half, acc - half)
    q = np.abs(num) // n  # C's division truncates toward zero
    y = np.where(num < 0, -q, q)
    return clamp_count(
        y, params.act_min, params.act_max, floor=params.floor, ceiling=params.ceiling
    )
