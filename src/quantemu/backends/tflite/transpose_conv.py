"""TRANSPOSE_CONV on int8: TFLite's scatter of exact products, then CONV_2D's output stage.

TFLite's reference loop (``reference_integer_ops::TransposeConv``, LiteRT and TFLite-Micro)
scatters ``(x + input_offset) * w[o, ky, kx, c]`` into an int32 scratch buffer at output
position ``(iy * sh - pad_top + ky, ix * sw - pad_left + kx)``, dropping positions outside the
output, adds the int32 bias and requantizes per output channel exactly as CONV_2D does (its
``Prepare`` is ``PopulateConvolutionQuantizationParams``, CONV_2D's). ``pad_top`` /
``pad_left`` are the padding before the image (SAME: ``floor(total / 2)``, VALID: 0) and the
output size is the model's ``output_shape``. There is no dilation.

The sum at each output position is exact and order-free, so it is computed here as CONV_2D
(:func:`~quantemu.backends.tflite.conv.conv2d`) over the input spread out on the output grid
(``x`` at ``iy * sh + kh - 1 - pad_top``, every other position the input's zero point, which
contributes 0 after the offset) with the kernel flipped in space: the same accumulator, the
same bound (``C_in * kh * kw * 255 * 128``), the same output stage.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.conv import _codes, conv2d
from quantemu.backends.tflite.params import ConvParams
from quantemu.errors import InvalidInputError

__all__ = ["padding_before", "spread_input", "transpose_conv2d"]


def padding_before(padding: str, kernel: int, stride: int, output: int) -> int:
    """TRANSPOSE_CONV's ``Prepare``: the padding before the image along one axis, from the
    file's SAME / VALID. ``ComputePaddingHeightWidth`` runs with the output size as the "input"
    of a convolution, so SAME pads ``max((ceil(output / stride) - 1) * stride + kernel -
    output, 0) // 2`` whatever the input's size; VALID pads 0.

    >>> padding_before("SAME", 3, 2, 8), padding_before("SAME", 4, 2, 8)
    (0, 1)
    """
    if padding == "VALID":
        return 0
    if padding != "SAME":
        raise InvalidInputError(f"padding_before: padding {padding!r} (SAME or VALID)")
    steps = -(-output // stride)
    return max((steps - 1) * stride + kernel - output, 0) // 2


def spread_input(x: np.ndarray, kernel, strides, pads_before, output_size, *, fill: int):
    """``x`` (NCHW) placed on the grid a stride-1 convolution with ``kernel`` reads to give
    ``output_size``: ``x[iy]`` at row ``iy * sh + kh - 1 - pad_top`` (likewise columns), rows
    outside the grid dropped, every other position ``fill``."""
    n, c = x.shape[:2]
    grid = [o + k - 1 for o, k in zip(output_size, kernel, strict=True)]
    out = np.full((n, c, *grid), fill, dtype=x.dtype)
    places = [
        np.arange(size) * s + k - 1 - p
        for size, s, k, p in zip(x.shape[2:], strides, kernel, pads_before, strict=True)
    ]
    keep = [(i >= 0) & (i < g) for i, g in zip(places, grid, strict=True)]
    rows, cols = (p[k] for p, k in zip(places, keep, strict=True))
    out[:, :, rows[:, None], cols[None, :]] = x[:, :, keep[0]][:, :, :, keep[1]]
    return out


def transpose_conv2d(x, w, bias, params: ConvParams, *, strides, pads_before, output_size):
    """int8 TRANSPOSE_CONV on NCHW codes: ``(y, counters)``.

    ``w`` is ``(C_in, C_out, kh, kw)`` int8 (ONNX's ConvTranspose layout; TFLite's filter
    ``(C_out, kh, kw, C_in)`` holds ``w[c, o, ky, kx]`` at ``[o, ky, kx, c]``), ``bias``
    ``C_out`` int32 values or None, ``pads_before = (pad_top, pad_left)``, ``output_size =
    (OH, OW)``.

    Formula: ``acc[n,o,oy,ox] = bias[o] + sum (x[n,c,iy,ix] + input_offset) * w[c,o,ky,kx]``
    over ``oy = iy*sh - pad_top + ky``, ``ox = ix*sw - pad_left + kx``; then CONV_2D's stage.

    >>> from quantemu.backends.tflite.params import conv_params
    >>> p = conv_params(1.0, 0, [1.0], 1.0, 0)
    >>> x = np.array([[[[1, 2]]]], np.int8)  # 1x2 image, stride 2, 1x3 kernel
    >>> w = np.array([[[[1, 10, 100]]]], np.int8)
    >>> y, _ = transpose_conv2d(x, w, None, p, strides=(1, 2), pads_before=(0, 0),
    ...                         output_size=(1, 5))
    >>> y.tolist()  # 1*[1, 10, 100] at 0, 2*[1, 10, 100] at 2: saturated at 127
    [[[[1, 10, 102, 20, 127]]]]
    """
    where = "transpose_conv2d"
    x = _codes(x, "x", where, ndim=4)
    w = _codes(w, "w", where, ndim=4)
    if w.shape[0] != x.shape[1]:
        raise InvalidInputError(
            f"{where}: w has {w.shape[0]} input channels (axis 0), x has {x.shape[1]}"
        )
    kernel = w.shape[2:]
    zero_point = -params.input_offset  # the code that contributes 0
    spread = spread_input(x, kernel, strides, pads_before, output_size, fill=zero_point)
    flipped = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    return conv2d(spread, flipped, bias, params)
