"""PyTorch's quantized linear/conv on the onednn engine: accumulate, then requantize in f32.

Page §6. The accumulator is the ``matmul``/``conv2d`` value with the u8 source zero point
already corrected in s32; the f32 sequence below depends on the kernel family (``impl``) and on
the reciprocal round trips PyTorch introduces when it hands scales to oneDNN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.conv import conv2d
from quantemu.backends.onednn.f32 import f32, rr, to_8bit
from quantemu.backends.onednn.matmul import matmul
from quantemu.backends.onednn.params import (
    Conv2dParams,
    ConvImpl,
    MatmulApi,
    MatmulParams,
    QuantizedConv2dParams,
    QuantizedImpl,
    QuantizedLinearParams,
    Requantization,
    SrcType,
    check_operand,
)
from quantemu.errors import InvalidInputError


@dataclass(frozen=True)
class QuantizedResult:
    """u8 outputs, the s32 accumulators they came from, and the pair sums that saturated."""

    y: np.ndarray
    acc: np.ndarray
    saturated_pairs: int


def requantize(
    acc: np.ndarray,
    channel_axis: int,
    quant: Requantization,
    impl: QuantizedImpl,
    *,
    w_round_trip: bool,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """u8 outputs of s32 accumulators: page §6.2, every step a separate binary32 operation.

    ``S = rr(rr(x_scale))``; ``W = rr(rr(w_scale))`` when ``w_round_trip`` (linear) else
    ``w_scale`` (conv); ``I = rr(y_scale)``; ``D = rr(rr(y_scale))``. Then
    ``v = a ⊗ (S ⊗ W)`` (``jit_uni``) or ``(a ⊗ S) ⊗ W`` (others), ``⊕ bias``, ``⊗ I`` (``⊘ D``
    for ``ref``), ``⊕ f32(y_zero_point)``, and ``clamp(rne(v), 0, 255)``.
    """
    v = requantize_f32(acc, channel_axis, quant, impl, w_round_trip=w_round_trip, bias=bias)
    return to_8bit(v, signed=False)


def requantize_f32(
    acc: np.ndarray,
    channel_axis: int,
    quant: Requantization,
    impl: QuantizedImpl,
    *,
    w_round_trip: bool,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """The binary32 value ``v`` of :func:`requantize` before ``clamp(rne(v), 0, 255)``.

    Whole-model simulation reads it to count the outputs that saturate (``rne(v)`` outside
    ``[0, 255]``) without evaluating the sequence twice.
    """
    channels = acc.shape[channel_axis]
    w_scales = _per_channel_scales(quant.w_scales, channels)
    shape = [1] * acc.ndim
    shape[channel_axis] = channels
    s = rr(rr(f32(quant.x_scale)))
    w = (rr(rr(w_scales)) if w_round_trip else w_scales).reshape(shape)
    b = None if bias is None else _check_bias(bias, channels).reshape(shape)
    # Each step is one binary32 operation written in place into one fresh buffer (the same
    # roundings as the expression form, one allocation instead of five).
    # The first product reads acc through a cast to binary32 (``dtype``): exact while
    # |acc| < 2**24, otherwise f32() rounding, as oneDNN; no separate conversion pass.
    v = np.empty_like(acc, dtype=np.float32)
    y_scale = f32(quant.y_scale)
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf saturates like any large value
        if impl is QuantizedImpl.JIT_UNI:
            np.multiply(acc, s * w, out=v, dtype=np.float32)
        else:
            np.multiply(acc, s, out=v, dtype=np.float32)
            np.multiply(v, w, out=v)
        if b is not None:
            np.add(v, b, out=v)
        if impl is QuantizedImpl.REF:
            np.divide(v, rr(rr(y_scale)), out=v)
        else:
            np.multiply(v, rr(y_scale), out=v)
        np.add(v, f32(quant.y_zero_point), out=v)
    return v


def quantized_linear(
    x: np.ndarray, w: np.ndarray, params: QuantizedLinearParams, bias: np.ndarray | None = None
) -> QuantizedResult:
    """PyTorch ``quantized::linear`` (onednn engine): ``x (M, K)`` u8, ``w (N, K)`` s8 -> u8."""
    check_operand(x, "quantized_linear: x", np.uint8, 2, note=" (M, K)")
    check_operand(w, "quantized_linear: w", np.int8, 2, note=" (N, K)")
    if x.shape[1] != w.shape[1]:
        raise InvalidInputError(
            f"quantized_linear: x is {x.shape} (M, K) and w is {w.shape} (N, K): K differs"
        )
    mp = MatmulParams(params.isa, SrcType.U8, MatmulApi.MATMUL, params.quant.x_zero_point)
    res = matmul(x, w.T, mp)
    y = requantize(res.acc, 1, params.quant, params.impl, w_round_trip=True, bias=bias)
    return QuantizedResult(y, res.acc, res.saturated_pairs)


def quantized_conv2d(
    x: np.ndarray, w: np.ndarray, params: QuantizedConv2dParams, bias: np.ndarray | None = None
) -> QuantizedResult:
    """PyTorch ``quantized::conv2d`` (onednn engine): u8 ``x (N, C, H, W)`` -> u8.

    The accumulator uses the ``direct`` segments (the vectors hold no shape that oneDNN runs
    through kernel relocation or gemm-based convolution), or is exact for ``impl = ref``.
    """
    family = ConvImpl.REF if params.impl is QuantizedImpl.REF else ConvImpl.DIRECT
    cp = Conv2dParams(params.isa, SrcType.U8, family, params.geometry, params.quant.x_zero_point)
    res = conv2d(x, w, cp)
    y = requantize(res.acc, 1, params.quant, params.impl, w_round_trip=False, bias=bias)
    return QuantizedResult(y, res.acc, res.saturated_pairs)


def _per_channel_scales(scales: tuple[float, ...], channels: int) -> np.ndarray:
    if len(scales) not in (1, channels):
        raise InvalidInputError(
            f"w_scales has {len(scales)} values for {channels} output channels; give one "
            "(per tensor) or one per output channel"
        )
    return np.broadcast_to(np.asarray(scales, dtype=np.float32), (channels,))


def _check_bias(bias: np.ndarray, channels: int) -> np.ndarray:
    if not isinstance(bias, np.ndarray) or bias.dtype != np.float32 or bias.shape != (channels,):
        got = f"{bias.dtype.name} {bias.shape}" if isinstance(bias, np.ndarray) else repr(bias)
        raise InvalidInputError(
            f"bias must be a float32 array with one value per output channel ({channels},), "
            f"got {got}"
        )
    return bias
