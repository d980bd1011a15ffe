"""Sliding windows over two axes (the gathering step of im2col, of pooling), with padding.

Convolution and pooling read, for every output position, a (strided, dilated) window of a padded
input. :func:`sliding_windows` builds that once as a strided view (no Python loop over pixels,
DESIGN principle 8); each backend then lays the view out in its own kernel's order (the layout is
the backend's decision: ``(kh, kw, c)`` rows for oneDNN and XS3, ``(c, kh, kw)`` columns for
NVDLA).
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from quantemu.errors import InvalidInputError

__all__ = ["sliding_windows"]


def _pairs(value, name: str, low: int) -> tuple[int, int]:
    vals = tuple(value) if not isinstance(value, numbers.Integral) else (value, value)
    if len(vals) != 2 or not all(isinstance(v, numbers.Integral) and v >= low for v in vals):
        raise InvalidInputError(
            f"sliding_windows: {name} must be one int or two ints >= {low}, got {value!r}"
        )
    return int(vals[0]), int(vals[1])


def _pad(x: np.ndarray, pads, pad_value, dtype, axes) -> np.ndarray:
    """``x`` with axes ``axes`` padded (``pads > 0``) or cropped (``< 0``), as ``dtype``."""
    top, left, bottom, right = (int(p) for p in pads)
    h, w = x.shape[axes[0]], x.shape[axes[1]]
    src = [slice(None)] * x.ndim
    src[axes[0]] = slice(max(-top, 0), h - max(-bottom, 0))
    src[axes[1]] = slice(max(-left, 0), w - max(-right, 0))
    x = x[tuple(src)]  # the crops: a view
    top, left, bottom, right = (max(p, 0) for p in (top, left, bottom, right))
    if not (top or left or bottom or right):
        return x if dtype is None else x.astype(dtype, copy=False)
    shape = list(x.shape)
    shape[axes[0]] += top + bottom
    shape[axes[1]] += left + right
    out = np.full(shape, pad_value, dtype=x.dtype if dtype is None else dtype)
    dst = [slice(None)] * x.ndim
    dst[axes[0]] = slice(top, top + x.shape[axes[0]])
    dst[axes[1]] = slice(left, left + x.shape[axes[1]])
    out[tuple(dst)] = x  # one copy, converting to dtype on the way
    return out


def sliding_windows(
    x,
    kernel,
    *,
    strides=1,
    dilations=1,
    pads=(0, 0, 0, 0),
    pad_value=0,
    axes=(-2, -1),
    dtype=None,
) -> np.ndarray:
    """Every window of ``x`` over two axes: a read-only view ``(..., OH, OW, ..., kh, kw)``.

    Formula: with ``xp`` the padded input, ``xp[i, j] = x[i - top, j - left]`` where that is
    inside ``x`` and ``pad_value`` elsewhere, ``y[..., oh, ow, ..., r, c] = xp[oh*sh + r*dh,
    ow*sw + c*dw]`` for ``0 <= oh < OH = (H + top + bottom - (kh-1)*dh - 1) // sh + 1`` (same for
    ``ow``). The two window axes ``axes`` of ``x`` become ``(OH, OW)`` in place and ``(kh, kw)``
    is appended at the end (as ``numpy.lib.stride_tricks.sliding_window_view``).

    Policy: no arithmetic, values are copied. ``pads = (top, left, bottom, right)``; a negative
    pad crops that many rows or columns (a window origin inside the image). ``kernel``,
    ``strides`` and ``dilations``: one int or two, ``>= 1``. ``dtype``: convert to it in the
    padding copy (default: keep ``x``'s); ``pad_value`` is converted to it. Without padding the
    result is a view of ``x`` (or of one converted copy). Positions whose window does not fit
    (``OH <= 0``) give an empty axis. Callers crop the view to a smaller output or copy it in
    their own layout (``np.ascontiguousarray(view.transpose(...))``).

    Mirrors: ONNX ``Conv``/``MaxPool`` windowing (``pads``, ``strides``, ``dilations``), lib_nn's
    XS3 window (``start_row``/``start_col`` = ``-top``/``-left``, padding with the zero point),
    oneDNN and NVDLA im2col (padding with code 0).

    >>> x = np.arange(9).reshape(3, 3)
    >>> sliding_windows(x, 2, strides=2, pads=(1, 1, 0, 0), pad_value=-1).tolist()
    [[[[-1, -1], [-1, 0]], [[-1, -1], [1, 2]]], [[[-1, 3], [-1, 6]], [[4, 5], [7, 8]]]]
    >>> sliding_windows(x, 2, dilations=2)[..., 0, 1].tolist(), sliding_windows(x, (1, 2)).shape
    ([[2]], (3, 2, 1, 2))
    >>> sliding_windows(x, 2, pads=(-1, 0, 0, -1)).tolist()
    [[[[3, 4], [6, 7]]]]
    """
    x = np.asarray(x)
    if len(pads) != 4:
        raise InvalidInputError(
            f"sliding_windows: pads must be (top, left, bottom, right), got {pads!r}"
        )
    kh, kw = _pairs(kernel, "kernel", 1)
    sh, sw = _pairs(strides, "strides", 1)
    dh, dw = _pairs(dilations, "dilations", 1)
    ax = tuple(a % x.ndim for a in axes)
    xp = _pad(x, pads, pad_value, dtype, ax)
    span = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    if xp.shape[ax[0]] < span[0] or xp.shape[ax[1]] < span[1]:
        shape = list(xp.shape)
        for a, k, st in zip(ax, span, (sh, sw), strict=True):
            shape[a] = (xp.shape[a] - k) // st + 1 if xp.shape[a] >= k else 0
        return np.zeros((*shape, kh, kw), dtype=xp.dtype)
    view = sliding_window_view(xp, span, axis=ax)
    index = [slice(None)] * view.ndim
    index[ax[0]], index[ax[1]] = slice(None, None, sh), slice(None, None, sw)
    index[-2], index[-1] = slice(None, None, dh), slice(None, None, dw)
    return view[tuple(index)]
