"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED on int8: exact sums, then the output stage.

TFLite's reference loops (``reference_integer_ops::ConvPerChannel``,
``DepthwiseConvPerChannel``, ``FullyConnected`` / ``FullyConnectedPerChannel``) accumulate
``(x + input_offset) * w`` over the taps inside the image, in int32, add the int32 bias, then
requantize per output channel. Taps outside the image are skipped, which is the same as reading
``x = z_in`` there: the windows here are padded with 0 after the offset is applied. The sums are
exact (:func:`~quantemu.intmath.matmul_exact`); TFLite's int32 accumulator cannot overflow for
``K * 255 * 128 + |bias| < 2**31``, and a larger value is refused by the output stage (C's
overflow is undefined behaviour, not a wrap to emulate).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.output import requantize_clamp, stage
from quantemu.backends.tflite.params import ConvParams
from quantemu.errors import InvalidInputError
from quantemu.intmath import matmul_exact, sliding_windows
from quantemu.intmath.matmul import ArrayCache

__all__ = ["conv2d", "depthwise_conv2d", "fully_connected"]

OFFSET_CODE_MAX = 255  # |x + input_offset| for int8 x and an int8 zero point


def _codes(x, name: str, where: str, ndim: int | None = None) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -128 or arr.max() > 127)):
        raise InvalidInputError(f"{where}: {name} must hold int8 codes, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise InvalidInputError(f"{where}: {name} must have {ndim} dimensions, got {arr.shape}")
    return arr


def _bias(bias, n_out: int, where: str) -> np.ndarray | None:
    if bias is None:
        return None
    b = np.asarray(bias)
    if b.shape != (n_out,) or b.dtype.kind not in "iu":
        raise InvalidInputError(
            f"{where}: bias must be {n_out} int32 values, got shape {b.shape} dtype {b.dtype}"
        )
    if b.size and (b.min() < -(2**31) or b.max() > 2**31 - 1):
        raise InvalidInputError(f"{where}: bias values must fit int32")
    return b.astype(np.int64)


def _finish(
    acc: np.ndarray,
    params: ConvParams,
    channel_shape: tuple[int, ...],
    where: str,
    *,
    bias: np.ndarray | None,
    bound: int,
    weights: np.ndarray,
):
    """The output stage of ``acc + bias``, one multiplier per channel (shaped
    ``channel_shape`` to broadcast along the channel axis) or one for the tensor; ``bound``
    bounds ``|acc|`` (proved by the caller: ``K * 255 * 128``). The stage's constants depend
    on the layer alone: they are kept with frozen ``weights``."""
    n_out = acc.shape[-len(channel_shape)]

    def make():
        m, s = np.array(params.multipliers, np.int64), np.array(params.shifts, np.int64)
        if m.size not in (1, n_out):
            raise InvalidInputError(
                f"{where}: {m.size} multipliers for {n_out} output channels; give one per "
                "channel (or one per tensor)"
            )
        m, s = m.reshape(channel_shape), s.reshape(channel_shape)
        b = None if bias is None else bias.reshape(channel_shape)
        return m, s, b, stage(m, s, params.rounding, b)

    key = (params, channel_shape, n_out, None if bias is None else bias.tobytes())
    m, s, b, st = _STAGES.get(weights, key, make)
    return requantize_clamp(
        acc,
        m,
        s,
        params.output_offset,
        act_min=params.act_min,
        act_max=params.act_max,
        rounding=params.rounding,
        floor=params.floor,
        ceiling=params.ceiling,
        bias=b,
        bound=bound,
        precomputed=st,
    )


_STAGES = ArrayCache()


def _offset_windows(x: np.ndarray, params: ConvParams, kernel, **geometry):
    """``(N, C, OH, OW, kh, kw)`` windows of ``x + input_offset``, padded with 0."""
    xs = x.astype(np.int16) + np.int16(params.input_offset)  # |.| <= 255
    return sliding_windows(xs, kernel, pad_value=0, **geometry)


def conv2d(x, w, bias, params: ConvParams, *, strides=(1, 1), dilations=(1, 1), pads=(0,) * 4):
    """int8 CONV_2D on NCHW codes with OIHW int8 weights: ``(y, counters)``.

    Formula: ``acc[n,o,i,j] = bias[o] + sum_{c,r,s} (xp[n,c,i*sh+r*dh,j*sw+s*dw] +
    input_offset) * w[o,c,r,s]`` over the padded input (padding contributes 0), then
    ``y = clamp(MBQM(acc, m[o], s[o]) + output_offset, act_min, act_max)``.

    Policy: exact sums; the requantizing multiply rounds twice (ties up, then away from zero).
    ``pads = (top, left, bottom, right)``; weights must have zero point 0 (TFLite's int8
    rule), so none is taken.

    Mirrors: ``reference_integer_ops::ConvPerChannel`` (LiteRT and TFLite-Micro).

    >>> from quantemu.backends.tflite.params import conv_params
    >>> p = conv_params(0.5, 1, [0.25], 1.0, 0)
    >>> x = np.array([[[[1, 3], [5, 7]]]], np.int8)
    >>> w = np.array([[[[1, 1], [1, 1]]]], np.int8)
    >>> y, c = conv2d(x, w, None, p, pads=(0, 0, 1, 1))  # sums 12, 8, 10, 6 times 1/8
    >>> y.tolist()
    [[[[2, 1], [1, 1]]]]
    """
    where = "tflite conv2d"
    x, w = _codes(x, "x", where, 4), _codes(w, "w", where, 4)
    n_out, c_in, kh, kw = w.shape
    if x.shape[1] != c_in:
        raise InvalidInputError(f"{where}: x has {x.shape[1]} channels, w expects {c_in}")
    b = _bias(bias, n_out, where)
    cols, (n, oh, ow) = _im2col(
        x, params.input_offset, (kh, kw), strides=strides, dilations=dilations, pads=pads
    )
    rows, w_sums = _weight_rows(w)
    acc = matmul_exact(cols, rows.T, a_max=128)  # |x| <= 128: int8 codes
    # sum (x + o) * w = sum x * w + o * sum w: the offset joins the bias, a per-channel constant
    total = w_sums * params.input_offset + (0 if b is None else b)
    bound = cols.shape[1] * 128 * 128
    y, counters = _finish(acc, params, (-1,), where, bias=total, bound=bound, weights=w)
    return y.reshape(n, oh, ow, n_out).transpose(0, 3, 1, 2), counters


_WEIGHT_ROWS = ArrayCache()


def _weight_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``w`` as read-only ``(O, kh*kw*C)`` rows (the column order of :func:`_im2col`) and
    their sums; made once per frozen weight tensor."""

    def make():
        rows = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1).copy()  # owns its data
        rows.setflags(write=False)  # frozen: matmul_exact caches what depends on it
        return rows, rows.sum(axis=1, dtype=np.int64)

    return _WEIGHT_ROWS.get(w, "tflite-rows", make)


def _im2col(x: np.ndarray, input_offset: int, kernel, *, strides, dilations, pads):
    """``(N*OH*OW, kh*kw*C)`` int8 columns of ``x`` and ``(N, OH, OW)``: padded with the input
    zero point ``-input_offset`` (TFLite skips taps outside the image: the same as a tap whose
    ``x + input_offset`` is 0), channels innermost so that the copy moves runs of ``C``."""
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=np.int8)  # NHWC
    win = sliding_windows(
        xh, kernel, strides=strides, dilations=dilations, pads=pads, pad_value=-input_offset,
        axes=(1, 2),
    )  # fmt: skip
    n, oh, ow, c = win.shape[:4]
    if kernel == (1, 1):
        return win.reshape(n * oh * ow, c), (n, oh, ow)
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1), (n, oh, ow)


def depthwise_conv2d(
    x, w, bias, params: ConvParams, *, strides=(1, 1), dilations=(1, 1), pads=(0,) * 4
):
    """int8 DEPTHWISE_CONV_2D: NCHW codes, weights ``(C_in * mult, 1, kh, kw)``.

    Formula: output channel ``o = c * mult + k`` reads input channel ``c = o // mult``:
    ``acc[n,o,i,j] = bias[o] + sum_{r,s} (xp[n,c,i*sh+r*dh,j*sw+s*dw] + input_offset) *
    w[o,0,r,s]``, then the output stage of :func:`conv2d`.

    Policy: as :func:`conv2d`. Mirrors: ``reference_integer_ops::DepthwiseConvPerChannel``
    (TFLite's weight layout ``(1, kh, kw, C_in * mult)`` has the same channel order).

    >>> from quantemu.backends.tflite.params import conv_params
    >>> p = conv_params(1.0, 0, [1.0, 0.5], 1.0, 0)
    >>> x, w = np.array([[[[3]]]], np.int8), np.array([[[[2]]], [[[-1]]]], np.int8)
    >>> depthwise_conv2d(x, w, [1, 0], p)[0].ravel().tolist()  # 3*2+1; -3/2: -1.5 -> -1 (up)
    [7, -1]
    """
    where = "tflite depthwise_conv2d"
    x, w = _codes(x, "x", where, 4), _codes(w, "w", where, 4)
    n_out, one, kh, kw = w.shape
    c_in = x.shape[1]
    if one != 1 or c_in == 0 or n_out % c_in:
        raise InvalidInputError(
            f"{where}: weights {w.shape} must be (C_in * mult, 1, kh, kw) with C_in = {c_in}"
        )
    mult = n_out // c_in
    b = _bias(bias, n_out, where)
    win = _offset_windows(x, params, (kh, kw), strides=strides, dilations=dilations, pads=pads)
    wr = w.reshape(c_in, mult, kh, kw).astype(np.int32)
    n, _, oh, ow = win.shape[:4]
    bound = kh * kw * OFFSET_CODE_MAX * 128
    dtype = np.int32 if bound <= 2**31 - 1 else np.int64  # |acc| <= bound: no wrap
    acc, tap = np.empty((n, c_in, mult, oh, ow), dtype), None
    for r in range(kh):  # a loop over taps, each a whole-tensor product
        for s in range(kw):
            out = acc if tap is None else tap
            np.multiply(win[:, :, None, :, :, r, s], wr[None, :, :, None, None, r, s], out=out)
            if tap is None:
                tap = np.empty_like(acc)
            else:
                acc += tap
    acc = acc.reshape(n, n_out, oh, ow)
    return _finish(acc, params, (-1, 1, 1), where, bias=b, bound=bound, weights=w)


def fully_connected(x, w, bias, params: ConvParams):
    """int8 FULLY_CONNECTED: codes ``(..., I)``, weights ``(O, I)``: ``(y (..., O), counters)``.

    Formula: ``acc[..., o] = bias[o] + sum_i (x[..., i] + input_offset) * w[o, i]``, then
    ``clamp(MBQM(acc, m[o], s[o]) + output_offset)`` with one multiplier per channel or one
    for the tensor.

    Mirrors: ``reference_integer_ops::FullyConnected`` / ``FullyConnectedPerChannel``.

    >>> from quantemu.backends.tflite.params import fully_connected_params
    >>> p = fully_connected_params(1.0, -1, [0.5], 1.0, 0)
    >>> x, w = np.array([[1, 2]], np.int8), np.array([[1, 1], [3, -1]], np.int8)
    >>> fully_connected(x, w, None, p)[0].tolist()  # (2 + 3) / 2 -> 3, (6 - 3) / 2 -> 2
    [[3, 2]]
    """
    where = "tflite fully_connected"
    x, w = _codes(x, "x", where), _codes(w, "w", where, 2)
    n_out, n_in = w.shape
    if x.ndim < 1 or x.shape[-1] != n_in:
        raise InvalidInputError(f"{where}: x {x.shape} must end with {n_in} features")
    b = _bias(bias, n_out, where)
    xs = x.reshape(-1, n_in).astype(np.int16) + np.int16(params.input_offset)
    acc = matmul_exact(xs, w.T, a_max=OFFSET_CODE_MAX).reshape(*x.shape[:-1], n_out)
    bound = n_in * OFFSET_CODE_MAX * 128
    return _finish(acc, params, (-1,), where, bias=b, bound=bound, weights=w)
