"""Window geometry: validation, zero-point padding, im2col patches and the padded-row order.

Output pixel ``(oy, ox)`` reads input rows ``start_row + oy*stride_v + r`` and columns
``start_col + ox*stride_h + c`` (``xs3.md`` section 2); positions outside the image read
``zero_point`` in every channel. Patches are gathered once from a padded copy of the input with
:func:`~quantemu.intmath.sliding_windows` (no Python loop over pixels). Every function also
takes images with leading batch axes ``(..., X_h, X_w, C)``: each image is windowed
independently, and the batch folds into the pixel dimension of the im2col.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.xs3.bso.params import ConvParams
from quantemu.errors import InvalidInputError
from quantemu.intmath import sliding_windows


def check_window_in_image(x_shape: tuple[int, ...], params: ConvParams, op: str) -> None:
    """lib_nn asserts that no output pixel's window lies entirely in padding (seed 004).

    With ``(X_h, X_w)`` the image and ``(Y_h, Y_w)`` the output: ``start_row + K_h > 0``,
    ``start_col + K_w > 0``, ``start_row + stride_v*(Y_h-1) < X_h`` and
    ``start_col + stride_h*(Y_w-1) < X_w``.
    """
    w, y = params.window, params.y_params
    x_h, x_w = x_shape[-3], x_shape[-2]
    checks = (
        (
            w.start_row + w.height > 0,
            f"the first window row ends above the image: "
            f"start_row + height = {w.start_row} + {w.height} <= 0",
        ),
        (
            w.start_col + w.width > 0,
            f"the first window column ends left of the image: "
            f"start_col + width = {w.start_col} + {w.width} <= 0",
        ),
        (
            w.start_row + w.stride_v * (y.height - 1) < x_h,
            f"the last output row's window starts below the image: start_row + stride_v*(Y_h-1) = "
            f"{w.start_row} + {w.stride_v}*{y.height - 1} >= X_h = {x_h}",
        ),
        (
            w.start_col + w.stride_h * (y.width - 1) < x_w,
            f"the last output column's window starts right of the image: start_col + "
            f"stride_h*(Y_w-1) = {w.start_col} + {w.stride_h}*{y.width - 1} >= X_w = {x_w}",
        ),
    )
    for ok, what in checks:
        if not ok:
            raise InvalidInputError(
                f"{op}: a window lies entirely in padding ({what}); lib_nn requires every "
                "window to overlap the image: move start_row/start_col or shrink y_params"
            )


def _span(start: int, stride: int, n_out: int, k: int) -> tuple[int, int]:
    """First and one-past-last input index any window touches along one axis."""
    return start, start + stride * (n_out - 1) + k


def patches(x: np.ndarray, params: ConvParams, dtype) -> np.ndarray:
    """im2col: ``(..., Y_h, Y_w, K_h, K_w, C)`` array of every window's input values, as ``dtype``.

    The windows of :func:`~quantemu.intmath.sliding_windows` over the input region every window
    touches: rows ``start_row .. start_row + stride_v*(Y_h-1) + K_h`` (likewise columns), padded
    with ``zero_point`` where they leave the image and cropped where they stay inside it.

    >>> from quantemu.backends.xs3.bso.params import Window, YParams
    >>> p = ConvParams(9, Window(2, 2, -1, 0, 1, 1), YParams(2, 1, 1))
    >>> patches(np.arange(4, dtype=np.int8).reshape(2, 2, 1), p, np.int8)[..., 0].tolist()
    [[[[9, 9], [0, 1]]], [[[0, 1], [2, 3]]]]
    """
    w, y = params.window, params.y_params
    r0, r1 = _span(w.start_row, w.stride_v, y.height, w.height)
    c0, c1 = _span(w.start_col, w.stride_h, y.width, w.width)
    pads = (-r0, -c0, r1 - x.shape[-3], c1 - x.shape[-2])  # negative: a crop
    view = sliding_windows(
        x,
        (w.height, w.width),
        strides=(w.stride_v, w.stride_h),
        pads=pads,
        pad_value=params.zero_point,
        axes=(-3, -2),
        dtype=dtype,
    )
    view = view[..., : y.height, : y.width, :, :, :]
    # (..., Y_h, Y_w, C, K_h, K_w) -> (..., Y_h, Y_w, K_h, K_w, C), one contiguous copy.
    lead = tuple(range(view.ndim - 5))
    n = len(lead)
    return np.ascontiguousarray(view.transpose(*lead, n, n + 1, n + 3, n + 4, n + 2))


def padded_row_order(x_h: int, params: ConvParams) -> np.ndarray:
    """``ROWS(oy)`` for every output row: ``(Y_h, K_h)`` kernel-row indices in visiting order.

    lib_nn's deep and shallowin fold the padding rows into a per-output-row adjusted bias first:
    rows above the image (ascending), then rows below it (ascending), then the rows inside the
    image (ascending) (``xs3.md`` 6.1). Without padding rows this is ``0, 1, ..., K_h-1``.

    >>> from quantemu.backends.xs3.bso.params import Window, YParams
    >>> p = ConvParams(0, Window(4, 1, -1, 0, 1, 1), YParams(2, 1, 4))
    >>> padded_row_order(2, p).tolist()
    [[0, 3, 1, 2], [2, 3, 0, 1]]
    """
    w, y = params.window, params.y_params
    rows = w.start_row + w.stride_v * np.arange(y.height)[:, None] + np.arange(w.height)
    rank = np.where(rows < 0, 0, np.where(rows >= x_h, 1, 2))
    return np.argsort(rank, axis=1, kind="stable")
