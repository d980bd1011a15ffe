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

__all__ = ["sliding_windows", "window_columns"]


def _pairs(value, name: str, low: int, where: str = "sliding_windows") -> tuple[int, int]:
    vals = tuple(value) if not isinstance(value, numbers.Integral) else (value, value)
    if len(vals) != 2 or not all(isinstance(v, numbers.Integral) and v >= low for v in vals):
        raise InvalidInputError(
            f"{where}: {name} must be one int or two ints >= {low}, got {value!r}"
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


def _tap_span(tap: int, out: int, size: int, *, stride: int, dilation: int, pad: int):
    """``(o0, o1, first)``: the outputs ``o0 <= o < o1`` whose tap ``tap`` reads inside an axis
    of ``size`` (the others read padding), and the input index that output ``o0`` reads."""
    offset = tap * dilation - pad  # the input index output 0 reads; negative: in the padding
    o0 = -(offset // stride) if offset < 0 else 0
    o1 = min(out, (size - 1 - offset) // stride + 1) if size - 1 - offset >= 0 else 0
    o0 = min(o0, out)
    return o0, max(o0, o1), offset + o0 * stride


def window_columns(x, kernel, *, strides=1, dilations=1, pads=(0, 0, 0, 0), pad_value=0):
    """The windows of NCHW ``x`` as a C-contiguous ``(N, C, kh, kw, OH, OW)`` array.

    Formula: ``y[n, c, r, s, oh, ow] = xp[n, c, oh*sh + r*dh, ow*sw + s*dw]``, ``xp`` the padded
    (or cropped) input as in :func:`sliding_windows`, of whose view ``(N, C, OH, OW, kh, kw)``
    this is a transposed copy. Reshaped to ``(N, C*kh*kw, OH*OW)`` (no copy) it is the
    channel-major im2col matrix: the columns of one image, ``(c, kh, kw)``-ordered, that a
    ``(M, C*kh*kw)`` weight matrix multiplies into NCHW outputs.

    Policy: no arithmetic, values are copied in ``x``'s dtype. Negative pads crop. Why not the
    view's own copy: each tap ``(r, s)`` is one strided slice of ``x`` (its in-bounds rectangle;
    the positions that read padding keep ``pad_value``), so the copy moves runs of a whole output
    row, where transposing the view moves one element at a time; and no padded input is built.

    Mirrors: the im2col of ONNX ``Conv`` (NVDLA's and the float convolution's column order).

    >>> x = np.arange(9).reshape(1, 1, 3, 3)
    >>> y = window_columns(x, 2, strides=2, pads=(1, 1, 0, 0), pad_value=-1)
    >>> y.shape, y[0, 0, 1, 1].tolist(), y[0, 0, 0, 0].tolist()
    ((1, 1, 2, 2, 2, 2), [[0, 2], [6, 8]], [[-1, -1], [-1, 4]])
    >>> v = sliding_windows(x, 2, strides=2, pads=(1, 1, 0, 0), pad_value=-1)
    >>> bool((v.transpose(0, 1, 4, 5, 2, 3) == y).all())
    True
    """
    x = np.asarray(x)
    if x.ndim != 4 or len(pads) != 4:
        raise InvalidInputError(
            f"window_columns: x must be NCHW and pads (top, left, bottom, right), got shape "
            f"{x.shape} and pads {pads!r}"
        )
    kernel = _pairs(kernel, "kernel", 1, "window_columns")
    strides = _pairs(strides, "strides", 1, "window_columns")
    dilations = _pairs(dilations, "dilations", 1, "window_columns")
    n, c, h, w = x.shape
    top, left, bottom, right = (int(p) for p in pads)
    out = []
    for size, k, st, d, before, after in zip(
        (h, w), kernel, strides, dilations, (top, left), (bottom, right), strict=True
    ):
        span = (k - 1) * d + 1
        padded = size + before + after
        out.append((padded - span) // st + 1 if padded >= span else 0)
    oh, ow = out
    y = np.empty((n, c, *kernel, oh, ow), dtype=x.dtype)
    rows = [
        _tap_span(r, oh, h, stride=strides[0], dilation=dilations[0], pad=top)
        for r in range(kernel[0])
    ]
    cols = [
        _tap_span(s, ow, w, stride=strides[1], dilation=dilations[1], pad=left)
        for s in range(kernel[1])
    ]
    full = all(o0 == 0 and o1 == oh for o0, o1, _ in rows) and all(
        p0 == 0 and p1 == ow for p0, p1, _ in cols
    )
    if not full and y.size:
        y.fill(pad_value)  # only where some tap reads padding
    for r, (o0, o1, i0) in enumerate(rows):
        for s, (p0, p1, j0) in enumerate(cols):
            if o1 > o0 and p1 > p0:
                ih = slice(i0, i0 + (o1 - o0 - 1) * strides[0] + 1, strides[0])
                iw = slice(j0, j0 + (p1 - p0 - 1) * strides[1] + 1, strides[1])
                y[:, :, r, s, o0:o1, p0:p1] = x[:, :, ih, iw]
    return y
