"""``avg_pool2d`` and ``max_pool2d`` on int8/uint8 tensors (page §7)."""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.f32 import f32, rr, to_8bit
from quantemu.backends.onednn.params import (
    AvgPool2dParams,
    MaxPool2dParams,
    PoolImpl,
    check_operand,
)
from quantemu.errors import InvalidInputError
from quantemu.intmath import sliding_windows


def avg_pool2d(x: np.ndarray, params: AvgPool2dParams) -> np.ndarray:
    """``y (N, C, OH, OW)`` of ``x (N, C, H, W)`` int8/uint8, same dtype.

    ``s`` is the exact sum of the in-bounds elements of the window and ``n`` their count
    (``exclude_padding``) or ``KH·KW``. ``jit``: ``rne(f32(s) ⊗ rr(n))``; ``ref``:
    ``rne(f32(s) ⊘ f32(n))``; both clamped to the dtype's range.
    """
    out_hw = _check(x, params.kernel, params.geometry, "avg_pool2d")
    # |s| <= 255 * KH * KW: int64 is exact for any window that fits in memory.
    s = _windows(x.astype(np.int64), 0, params, out_hw).sum(axis=(-2, -1))
    ones = np.ones((1, 1, *x.shape[2:]), dtype=np.int64)
    inside = _windows(ones, 0, params, out_hw).sum(axis=(-2, -1))[0, 0]  # (OH, OW)
    if (inside == 0).any():
        oh, ow = np.argwhere(inside == 0)[0]
        raise InvalidInputError(
            f"avg_pool2d: output ({oh}, {ow}) has a window with no in-bounds element (kernel "
            f"{params.kernel}, pads {params.pads}); reduce the padding"
        )
    kh, kw = params.kernel
    n = f32(inside if params.exclude_padding else np.full_like(inside, kh * kw))
    sf = f32(s)
    v = sf * rr(n) if params.impl is PoolImpl.JIT else sf / n
    return to_8bit(v, signed=x.dtype == np.int8)


def max_pool2d(x: np.ndarray, params: MaxPool2dParams) -> np.ndarray:
    """``y (N, C, OH, OW)``: the maximum of the in-bounds elements of each window.

    One vectorised maximum per kernel tap over every output (padding holds the dtype's
    minimum, so it never wins over an in-bounds element).
    """
    out_hw = _check(x, params.kernel, params.geometry, "max_pool2d")
    for axis in (0, 1):
        reach = _in_bounds_1d(x.shape[2 + axis], params, axis, out_hw[axis])
        if not reach.all():
            raise InvalidInputError(
                f"max_pool2d: a window has no in-bounds element (kernel {params.kernel}, pads "
                f"{params.pads}); reduce the padding"
            )
    top, left, bottom, right = params.pads
    neutral = np.iinfo(x.dtype).min
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=neutral)
    (kh, kw), (sh, sw), (oh, ow) = params.kernel, params.strides, out_hw
    y = None
    for i in range(kh):
        for j in range(kw):
            tap = xp[:, :, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
            y = tap.copy() if y is None else np.maximum(y, tap, out=y)
    return y


def _in_bounds_1d(size: int, params, axis: int, out: int) -> np.ndarray:
    """Per output index along ``axis``: whether its window reaches an in-bounds element."""
    start = np.arange(out) * params.strides[axis] - params.pads[axis]
    stop = start + params.kernel[axis]  # exclusive
    return (stop > 0) & (start < size)


def _windows(x, fill, params, out_hw) -> np.ndarray:
    """Strided windows ``(N, C, OH, OW, KH, KW)`` of ``x`` padded with ``fill``."""
    win = sliding_windows(
        x, params.kernel, strides=params.strides, pads=params.pads, pad_value=fill
    )
    return win[:, :, : out_hw[0], : out_hw[1]]


def _check(x: np.ndarray, kernel, geometry, where: str) -> tuple[int, int]:
    check_operand(x, f"{where}: x", (np.int8, np.uint8), 4, "(N, C, H, W)")
    return geometry.output_size(x.shape[2], x.shape[3], *kernel)
