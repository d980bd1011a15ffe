"""Scalar Python-int twins of this package's kernels: TFLite's reference loops transcribed one
output element at a time, the specification the vectorized kernels are tested against with
``==``. Arrays come in as NumPy arrays or nested lists and are read element by element; nothing
here is vectorized, and nothing is fast.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from quantemu.backends.tflite.params import MultiplierRounding
from quantemu.intmath.reference import multiply_by_quantized_multiplier_double_rounding as mbqm
from quantemu.intmath.reference import multiply_shift_right_round_half_up

__all__ = [
    "add",
    "average_pool2d",
    "clamp",
    "conv2d",
    "depthwise_conv2d",
    "dequantize",
    "fully_connected",
    "max_pool2d",
    "mean",
    "mul",
    "prelu",
    "quantize_float",
    "requantize",
    "resize_bilinear",
    "resize_nearest",
    "transpose_conv2d",
]


def clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


def _c_div(n: int, d: int) -> int:
    """C's ``/``: truncation toward zero."""
    q = abs(n) // abs(d)
    return q if (n >= 0) == (d > 0) else -q


def _out_size(size: int, k: int, stride: int, dil: int, padded: int) -> int:
    """Output positions along one axis; ``padded`` = before + after."""
    return (size + padded - (k - 1) * dil - 1) // stride + 1


def _stage(acc: int, params, o: int) -> int:
    k = o if len(params.multipliers) > 1 else 0
    m, s = params.multipliers[k], params.shifts[k]
    if params.rounding is MultiplierRounding.DOUBLE:
        raw = mbqm(acc, m, s) + params.output_offset
    else:  # one rounding, ties up, of the exact product
        raw = multiply_shift_right_round_half_up(acc, m, 31 - s) + params.output_offset
    return clamp(raw, params.act_min, params.act_max)


def _conv_like(x, w, bias, params, *, strides, dilations, pads, depthwise: bool) -> np.ndarray:
    """ConvPerChannel / DepthwiseConvPerChannel: taps outside the image are skipped."""
    x, w = np.asarray(x), np.asarray(w)
    n_b, c_in, h, wd = x.shape
    n_out, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (top, left, bottom, right) = strides, dilations, pads
    oh, ow = _out_size(h, kh, sh, dh, top + bottom), _out_size(wd, kw, sw, dw, left + right)
    mult = n_out // c_in
    y = np.zeros((n_b, n_out, oh, ow), np.int64)
    for b, o, i, j in itertools.product(range(n_b), range(n_out), range(oh), range(ow)):
        acc = 0
        channels = [o // mult] if depthwise else range(c_in)
        for ci, r, s in itertools.product(channels, range(kh), range(kw)):
            yy, xx = i * sh - top + r * dh, j * sw - left + s * dw
            if 0 <= yy < h and 0 <= xx < wd:
                wv = int(w[o, 0, r, s]) if depthwise else int(w[o, ci, r, s])
                acc += (int(x[b, ci, yy, xx]) + params.input_offset) * wv
        if bias is not None:
            acc += int(bias[o])
        y[b, o, i, j] = _stage(acc, params, o)
    return y


def conv2d(x, w, bias, params, *, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0)):
    return _conv_like(
        x, w, bias, params, strides=strides, dilations=dilations, pads=pads, depthwise=False
    )


def depthwise_conv2d(x, w, bias, params, *, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0)):
    return _conv_like(
        x, w, bias, params, strides=strides, dilations=dilations, pads=pads, depthwise=True
    )


def transpose_conv2d(x, w, bias, params, *, strides, pads_before, output_size) -> np.ndarray:
    """``reference_integer_ops::TransposeConv``: every input tap scattered into an int32
    scratch buffer (positions outside the output dropped), then bias and the output stage.
    ``w`` is ``(C_in, C_out, kh, kw)``."""
    x, w = np.asarray(x), np.asarray(w)
    n_b, c_in, h, wd = x.shape
    _, n_out, kh, kw = w.shape
    (sh, sw), (top, left), (oh, ow) = strides, pads_before, output_size
    acc = [[[[0] * ow for _ in range(oh)] for _ in range(n_out)] for _ in range(n_b)]
    for b, c, iy, ix, ky, kx in itertools.product(
        range(n_b), range(c_in), range(h), range(wd), range(kh), range(kw)
    ):
        yy, xx = iy * sh - top + ky, ix * sw - left + kx
        if 0 <= yy < oh and 0 <= xx < ow:
            v = int(x[b, c, iy, ix]) + params.input_offset
            for o in range(n_out):
                acc[b][o][yy][xx] += v * int(w[c, o, ky, kx])
    y = np.zeros((n_b, n_out, oh, ow), np.int64)
    for b, o, i, j in itertools.product(range(n_b), range(n_out), range(oh), range(ow)):
        total = acc[b][o][i][j] + (int(bias[o]) if bias is not None else 0)
        y[b, o, i, j] = _stage(total, params, o)
    return y


def fully_connected(x, w, bias, params) -> np.ndarray:
    x, w = np.asarray(x), np.asarray(w)
    rows = x.reshape(-1, x.shape[-1])
    y = np.zeros((rows.shape[0], w.shape[0]), np.int64)
    for r, o in itertools.product(range(rows.shape[0]), range(w.shape[0])):
        acc = sum(
            (int(v) + params.input_offset) * int(c) for v, c in zip(rows[r], w[o], strict=True)
        )
        if bias is not None:
            acc += int(bias[o])
        y[r, o] = _stage(acc, params, o)
    return y.reshape(*x.shape[:-1], w.shape[0])


def add(a: int, b: int, params) -> int:
    """One element of ADD/SUB (``reference_integer_ops::Add``, ``reference_ops::Sub``)."""
    shift = 1 << params.left_shift
    s1 = mbqm((a + params.input1_offset) * shift, params.input1_multiplier, params.input1_shift)
    s2 = mbqm((b + params.input2_offset) * shift, params.input2_multiplier, params.input2_shift)
    raw = s1 - s2 if params.subtract else s1 + s2
    out = mbqm(raw, params.output_multiplier, params.output_shift) + params.output_offset
    return clamp(out, params.act_min, params.act_max)


def mul(a: int, b: int, params) -> int:
    """One element of MUL (``reference_integer_ops::Mul``)."""
    prod = (a + params.input1_offset) * (b + params.input2_offset)
    out = mbqm(prod, params.output_multiplier, params.output_shift) + params.output_offset
    return clamp(out, params.act_min, params.act_max)


def prelu(x: int, alpha: int, params) -> int:
    """One element of PRELU (``reference_ops::BroadcastPrelu4DSlow``, int8)."""
    v = x - params.input_zero_point
    if v >= 0:
        out = mbqm(v, params.multiplier_identity, params.shift_identity)
    else:
        a = alpha - params.alpha_zero_point
        out = mbqm(v * a, params.multiplier_alpha, params.shift_alpha)
    return clamp(out + params.output_zero_point, -128, 127)


def _pool(x, kernel, strides, pads, reduce_taps) -> np.ndarray:
    x = np.asarray(x)
    n_b, c, h, wd = x.shape
    (kh, kw), (sh, sw), (top, left, bottom, right) = kernel, strides, pads
    oh, ow = _out_size(h, kh, sh, 1, top + bottom), _out_size(wd, kw, sw, 1, left + right)
    y = np.zeros((n_b, c, oh, ow), np.int64)
    for b, ch, i, j in itertools.product(range(n_b), range(c), range(oh), range(ow)):
        taps = [
            int(x[b, ch, i * sh - top + r, j * sw - left + s])
            for r, s in itertools.product(range(kh), range(kw))
            if 0 <= i * sh - top + r < h and 0 <= j * sw - left + s < wd
        ]
        y[b, ch, i, j] = reduce_taps(taps)
    return y


def max_pool2d(x, kernel, params, *, strides=(1, 1), pads=(0, 0, 0, 0)) -> np.ndarray:
    return _pool(x, kernel, strides, pads, lambda t: clamp(max(t), params.act_min, params.act_max))


def average_pool2d(x, kernel, params, *, strides=(1, 1), pads=(0, 0, 0, 0)) -> np.ndarray:
    def avg(taps: list[int]) -> int:
        acc, n = sum(taps), len(taps)
        q = _c_div(acc + n // 2, n) if acc > 0 else _c_div(acc - n // 2, n)
        return clamp(q, params.act_min, params.act_max)

    return _pool(x, kernel, strides, pads, avg)


def mean(x, axes, keepdims: bool, params) -> np.ndarray:
    """``QuantizedMeanOrSum``: the multiplier absorbs ``1 / count`` before one MBQM."""
    x = np.asarray(x)
    ax = sorted({a % x.ndim for a in axes})
    count = math.prod(x.shape[a] for a in ax)
    k = min(count.bit_length() - 1, 32, 31 + params.shift)
    m, s = (params.multiplier << k) // count, params.shift - k
    out_shape = [1 if a in ax else d for a, d in enumerate(x.shape)]
    y = np.zeros(out_shape, np.int64)
    for idx in itertools.product(*(range(d) for d in out_shape)):
        ranges = [range(x.shape[a]) if a in ax else [idx[a]] for a in range(x.ndim)]
        total = sum(int(x[full]) for full in itertools.product(*ranges))
        raw = mbqm(total - params.input_zero_point * count, m, s) + params.output_zero_point
        y[idx] = clamp(raw, -128, 127)
    return y if keepdims else y.reshape([d for a, d in enumerate(x.shape) if a not in ax])


def requantize(v: int, params) -> int:
    raw = mbqm(v - params.input_zero_point, params.multiplier, params.shift)
    return clamp(raw + params.output_zero_point, -128, 127)


def quantize_float(v: float, scale: float, zero_point: int) -> int:
    """``AffineQuantize``: one float32 division (NumPy's float32 scalars are IEEE binary32),
    then ``round`` half away from zero, exactly on the float32 quotient."""
    q = float(np.float32(v) / np.float32(scale))
    if math.isinf(q):
        return 127 if q > 0 else -128
    r = math.floor(q) if q >= 0 else math.ceil(q)
    if abs(q - r) >= 0.5:  # exact: q and r are floats within 2**24 ulps of each other
        r += 1 if q >= 0 else -1
    return clamp(r + zero_point, -128, 127)


def dequantize(v: int, scale: float, zero_point: int) -> float:
    """``float32(double(scale) * (v - zero_point))``; the double product is exact."""
    return float(np.float32(float(np.float32(scale)) * (v - zero_point)))


def _nearest(i: int, size_in: int, size_out: int, align: bool, half: bool) -> int:
    """``GetNearestNeighbor``: float32 scale and product, std::round or std::floor."""
    f32 = np.float32
    scale = (
        f32(size_in - 1) / f32(size_out - 1)
        if align and size_out > 1
        else f32(size_in) / f32(size_out)
    )
    v = float((f32(i) + f32(0.5 if half else 0.0)) * scale)
    out = min(math.floor(v + 0.5) if align else math.floor(v), size_in - 1)
    return max(0, out) if half else out


def _resize(x, size, element) -> np.ndarray:
    """An NCHW int8 output of H, W = ``size``, each element ``element(plane, i, j)``."""
    x = np.asarray(x)
    n, c = x.shape[:2]
    y = np.zeros((n, c, *size), np.int8)
    for b, ch, i, j in itertools.product(range(n), range(c), range(size[0]), range(size[1])):
        y[b, ch, i, j] = element(x[b, ch], i, j)
    return y


def resize_nearest(x, size, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """``reference_ops::ResizeNearestNeighbor`` on NCHW codes, one element at a time."""
    (h, w), (oh, ow), flags = np.shape(x)[2:], size, (align_corners, half_pixel_centers)

    def element(plane, i: int, j: int) -> int:
        return int(plane[_nearest(i, h, oh, *flags), _nearest(j, w, ow, *flags)])

    return _resize(x, size, element)


def _interpolation(i: int, size_in: int, size_out: int, align: bool, half: bool):
    """``ComputeInterpolationValues`` (integer form): ``(scaled, lower, upper)``."""
    if align and size_out > 1:
        scale = _c_div(1024 * (size_in - 1) + _c_div(size_out - 1, 2), size_out - 1)
    else:
        scale = _c_div(1024 * size_in + _c_div(size_out, 2), size_out)
    scaled = i * scale + _c_div(scale, 2) - 512 if half else i * scale
    return scaled, max(_c_div(scaled, 1024), 0), min(_c_div(scaled + 1023, 1024), size_in - 1)


def resize_bilinear(x, size, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The int8 ``reference_ops::ResizeBilinear`` on NCHW codes, one element at a time."""
    (h, w), (oh, ow), flags = np.shape(x)[2:], size, (align_corners, half_pixel_centers)

    def element(plane, i: int, j: int) -> int:
        iy, y0, y1 = _interpolation(i, h, oh, *flags)
        ix, x0, x1 = _interpolation(j, w, ow, *flags)
        dy, dx = iy - 1024 * y0, ix - 1024 * x0
        s = (
            int(plane[y0, x0]) * (1024 - dy) * (1024 - dx)
            + int(plane[y1, x0]) * dy * (1024 - dx)
            + int(plane[y0, x1]) * (1024 - dy) * dx
            + int(plane[y1, x1]) * dy * dx
        )
        return _c_div(s + ((1 << 19) if s > 0 else -(1 << 19)), 1 << 20)

    return _resize(x, size, element)
