"""The lib_nn 2D convolutions: conv2d_deep, conv2d_shallowin, conv2d_1x1, conv2d_depthwise.

Pure functions: int8 arrays + a BSO tensor + frozen parameters in, an
:class:`~quantemu.backends.xs3.bso.result.OpResult` out. Semantics: ``xs3.md`` sections 5 and 6;
the accumulation strategy is in :mod:`.accumulation`, the output stage in :mod:`.output_stage`.

Batches: lib_nn takes one ``(X_h, X_w, C_in)`` image. Every convolution here also accepts a
batch ``(N, X_h, X_w, C_in)`` and returns ``(N, Y_h, Y_w, C_out)``: each image is computed
exactly as a separate call would (the batch folds into the pixel dimension of the im2col), and
the counters add up over the batch.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.xs3.bso import geometry
from quantemu.backends.xs3.bso.accumulation import (
    Saturation,
    Steps,
    accumulate_conv,
    accumulate_depthwise,
    gemm_dtype,
)
from quantemu.backends.xs3.bso.output_stage import LastStep, bso_stage
from quantemu.backends.xs3.bso.packing import unpack_bso
from quantemu.backends.xs3.bso.params import DEFAULT_OPTIONS, ConvParams, Model, OutputOptions
from quantemu.backends.xs3.bso.result import OpResult, make_result
from quantemu.backends.xs3.bso.validate import check_multiple_of_4, check_shape, check_tensor
from quantemu.errors import InvalidInputError

VLMACCR_BYTES = 32  # one VLMACCR multiplies 32 int8 pairs into one accumulator
SHALLOWIN_C_IN = (4, 8, 16, 32)


def _xmax(x: np.ndarray, zero_point: int = 0) -> int:
    """A bound on ``|x|`` over the image and its padding (for the no-saturation test)."""
    return max(-int(x.min()), int(x.max()), abs(zero_point))


def _check_conv_io(x, k, k_ndim: int, params: ConvParams | None, op: str) -> tuple[int, int]:
    """Common checks of X and K; returns ``(C_in, C_out)`` (C_out from K's first axis)."""
    check_tensor(x, "X", np.int8, (3, 4), op)
    check_tensor(k, "K", np.int8, k_ndim, op)
    c_in = x.shape[-1]
    check_multiple_of_4(c_in, "X_c (input channels)", op)
    c_out = k.shape[0] if op != "conv2d_depthwise" else k.shape[2]
    check_multiple_of_4(c_out, "Y_c (output channels)", op)
    if params is not None:
        if params.y_params.channels != c_out:
            raise InvalidInputError(
                f"{op}: y_params.channels = {params.y_params.channels} but K has "
                f"{c_out} output channels (shape {k.shape}); make them equal"
            )
        geometry.check_window_in_image(x.shape, params, op)
    return c_in, c_out


def _finish(accumulated, ch, last: LastStep, options: OutputOptions, shape) -> OpResult:
    y, counters, y_raw = bso_stage(
        accumulated[0], ch, last, options.output_low, options.model, raw=True
    )
    return make_result(y, accumulated, counters, shape, y_raw)


def _windowed(x, weights, bso, params: ConvParams, *, op: str, steps: Steps) -> OpResult:
    """deep and shallowin: im2col, per-step saturation in ``ROWS(oy)`` order, wrapping stage."""
    y = params.y_params
    c_out, k_h = weights.shape[0], weights.shape[1]
    ch = unpack_bso(bso, c_out, op=op)
    gemm_dtype(weights[0].size)  # rejects dot products too long for an exact GEMM
    # int8 values are exact in float32; exact_gemm splits long dot products into float32 chunks.
    cols = geometry.patches(x, params, np.float32)  # (..., Y_h, Y_w, K_h, K_w, C_in)
    images = int(np.prod(x.shape[:-3]))  # 1 without a batch axis
    cols = cols.reshape(images * y.height * y.width, k_h, -1)
    # Every pixel of output row oy shares ROWS(oy), in every image of the batch.
    order = np.repeat(geometry.padded_row_order(x.shape[-3], params), y.width, axis=0)
    order = np.tile(order, (images, 1))
    accumulated = accumulate_conv(
        cols,
        weights.reshape(c_out, k_h, -1),
        ch.bias,
        mode=Saturation.STEPWISE,
        steps=steps,
        row_order=order,
        xmax=_xmax(x, params.zero_point),
    )
    shape = (*x.shape[:-3], y.height, y.width, c_out)
    return _finish(accumulated, ch, LastStep.INT8_WRAPPING, params.options, shape)


def conv2d_deep(X: np.ndarray, K: np.ndarray, BSO: np.ndarray, params: ConvParams) -> OpResult:
    """lib_nn ``conv2d_deep``: a 2D convolution, any window, C_in and C_out multiples of 4.

    ``X``: int8 ``(X_h, X_w, C_in)``; ``K``: int8 ``(C_out, K_h, K_w, C_in)``; ``BSO``: int16
    ``(ceil(C_out/16), 7, 16)``. Accumulation (``xs3.md`` 6.1): bias, then for each kernel row
    in ``ROWS(oy)`` order and each column, one saturation per 32-channel chunk (VLMACCR, host and
    device alike). Output: ``CLAMP(RSHR_W(a2, shift2), lo, 127)`` (the host's second rounding
    add wraps). Returns int8 ``(Y_h, Y_w, C_out)`` in an OpResult (``(N, Y_h, Y_w, C_out)``
    for a batch ``X`` of shape ``(N, X_h, X_w, C_in)``, see the module docstring).
    """
    op = "conv2d_deep"
    _check_conv_io(X, K, 4, params, op)
    w = params.window
    check_shape(
        K,
        "K",
        (K.shape[0], w.height, w.width, X.shape[-1]),
        "(C_out, window.height, window.width, C_in)",
        op,
    )
    return _windowed(X, K, BSO, params, op=op, steps=Steps(X.shape[-1], VLMACCR_BYTES))


def _check_shallowin(x, k, params: ConvParams, op: str) -> None:
    """seed 004's constraints plus the page's: C_in in {4,8,16,32}, K_w*C_in <= 32, zero cols."""
    c_in, w = x.shape[-1], params.window
    if c_in not in SHALLOWIN_C_IN:
        raise InvalidInputError(
            f"{op}: X_c = {c_in} is not one of 4, 8, 16, 32; whole kernel columns must fill the "
            "32-byte rows (lib_nn's padding masks are wrong for other C_in); use conv2d_deep"
        )
    if w.width * c_in > VLMACCR_BYTES:
        raise InvalidInputError(
            f"{op}: K_w*X_c = {w.width * c_in} > 32 (K_w={w.width}, X_c={c_in}); a kernel row "
            "must fit one 32-byte VLMACCR; use conv2d_deep"
        )
    cols = VLMACCR_BYTES // c_in
    check_shape(
        k,
        "K",
        (k.shape[0], w.height, cols, c_in),
        f"the augmented kernel (C_out, K_h, 32/X_c = {cols}, X_c): pad each kernel row "
        f"with zero columns from window.width = {w.width} to {cols}",
        op,
    )
    extra = np.argwhere(k[:, :, w.width :, :] != 0)
    if extra.size:
        co, r, c, i = (int(v) for v in extra[0])
        raise InvalidInputError(
            f"{op}: augmented kernel column {w.width + c} >= window.width = {w.width} is not "
            f"zero (K[{co}, {r}, {w.width + c}, {i}] = {int(k[co, r, w.width + c, i])}, "
            f"{len(extra)} nonzero value(s)); those columns must be zero"
        )


def conv2d_shallowin(X: np.ndarray, K: np.ndarray, BSO: np.ndarray, params: ConvParams) -> OpResult:
    """lib_nn ``conv2d_shallowin``: a convolution whose kernel rows fit one 32-byte vector.

    ``X``: int8 ``(X_h, X_w, C_in)`` with C_in in {4, 8, 16, 32}; ``K``: the augmented int8
    kernel ``(C_out, K_h, 32/C_in, C_in)`` whose columns ``>= window.width`` are zero;
    ``window.width * C_in <= 32``. Accumulation (``xs3.md`` 6.2): one saturation per kernel row,
    rows in ``ROWS(oy)`` order. Output stage as conv2d_deep.
    """
    op = "conv2d_shallowin"
    _check_conv_io(X, K, 4, params, op)
    _check_shallowin(X, K, params, op)
    used = np.ascontiguousarray(K[:, :, : params.window.width, :])  # zero columns add nothing
    row = params.window.width * X.shape[-1]
    return _windowed(X, used, BSO, params, op=op, steps=Steps(row, row))


def conv2d_1x1(
    X: np.ndarray, K: np.ndarray, BSO: np.ndarray, options: OutputOptions = DEFAULT_OPTIONS
) -> OpResult:
    """lib_nn ``conv2d_1x1``: a pointwise convolution (no window, padding or zero point).

    ``X``: int8 ``(H, W, C_in)``; ``K``: int8 ``(C_out, C_in)``. Accumulation: the host
    saturates after **every** product (``xs3.md`` 6.3), the device once per 32-byte VLMACCR.
    Output: ``CLAMP(RSHR(a2, shift2), lo, 127)`` (exact second rounding). Returns int8
    ``(H, W, C_out)``.
    """
    op = "conv2d_1x1"
    c_in, c_out = _check_conv_io(X, K, 2, None, op)
    check_shape(K, "K", (c_out, c_in), "(C_out, C_in) with C_in from X", op)
    ch = unpack_bso(BSO, c_out, op=op)
    host = options.model is Model.HOST_REFERENCE
    accumulated = accumulate_conv(
        X.reshape(-1, 1, c_in),
        K.reshape(c_out, 1, c_in),
        ch.bias,
        mode=Saturation.STEPWISE,
        steps=Steps(c_in, 1 if host else VLMACCR_BYTES),
        xmax=_xmax(X),
    )
    shape = (*X.shape[:-1], c_out)
    return _finish(accumulated, ch, LastStep.INT8_EXACT, options, shape)


def conv2d_depthwise(X: np.ndarray, K: np.ndarray, BSO: np.ndarray, params: ConvParams) -> OpResult:
    """lib_nn ``conv2d_depthwise``: channel ``c`` convolves input channel ``c`` with ``K[..., c]``.

    ``X``: int8 ``(X_h, X_w, C)``; ``K``: int8 ``(K_h, K_w, C)``. Accumulation (``xs3.md`` 6.4):
    the host adds in plain int32 and **wraps**; the device (VLMACC) saturates after every product,
    taps in row-major order. Output: ``CLAMP(RSHR(a2, shift2), lo, 127)``.
    """
    op = "conv2d_depthwise"
    c, _ = _check_conv_io(X, K, 3, params, op)
    w, y = params.window, params.y_params
    check_shape(K, "K", (w.height, w.width, c), "(window.height, window.width, C)", op)
    ch = unpack_bso(BSO, c, op=op)
    cols = geometry.patches(X, params, np.int8).reshape(-1, w.height * w.width, c)
    host = params.options.model is Model.HOST_REFERENCE
    accumulated = accumulate_depthwise(
        cols,
        K.reshape(-1, c),
        ch.bias,
        mode=Saturation.WRAP if host else Saturation.STEPWISE,
        xmax=_xmax(X, params.zero_point),
    )
    shape = (*X.shape[:-3], y.height, y.width, c)
    return _finish(accumulated, ch, LastStep.INT8_EXACT, params.options, shape)
