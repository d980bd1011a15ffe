"""PDP pooling (``conformance/nvdla.md`` §4): max, min and average with padding values.

Windows are reduced tap by tap: one strided slice of the padded cube per kernel position (at
most 64), each combined with the running result over every output at once; no loop over pixels
or channels. A cube may carry a leading batch axis (``[N, C, H, W]``): the registers describe
one ``[C, H, W]`` cube and every image is pooled with them, as the firmware runs the same layer
once per image. Average pooling adds the ``PAD_VALUE_<n>X`` registers for padded rows/columns,
wraps the sum to the accumulator width (16 bits for INT8, 32 for INT16), multiplies by the two
reciprocals with a half-away rounding after each, and wraps the result to the output width.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.fp16.pdp import pdp_fp16
from quantemu.backends.nvdla.registers import PdpGeometry, PdpRegisters, PoolingMethod, Precision
from quantemu.errors import InvalidInputError
from quantemu.intmath import shift_right_round_half_away, wrap

__all__ = ["pdp", "pdp_avg", "pdp_max", "pdp_min"]


def _check_input(x, regs: PdpRegisters, widen: bool = True) -> np.ndarray:
    """``x`` checked; int64, or (``widen=False``) as is when its dtype proves the range."""
    g = regs.geometry()
    shape = (g.channels, g.height, g.width)
    a = np.asarray(x)
    if a.dtype.kind not in "iu" or a.shape[-3:] != shape or a.ndim not in (3, 4):
        raise InvalidInputError(
            f"pdp: X must be an integer array of shape (C, H, W) = {shape} (CUBE_IN_CHANNEL/"
            f"HEIGHT/WIDTH + 1), or (N, C, H, W) for a batch, got dtype {a.dtype} shape {a.shape}"
        )
    bits = 8 if regs.input_type is Precision.INT8 else 16
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    info = np.iinfo(a.dtype)
    if info.min >= lo and info.max <= hi:  # the dtype holds the range: no scan
        return a.astype(np.int64) if widen else a
    a = a.astype(np.int64)
    if a.size and (a.min() < lo or a.max() > hi):
        raise InvalidInputError(
            f"pdp: INPUT_DATA = {regs.input_type.name} but X holds values in "
            f"[{a.min()}, {a.max()}], outside [{lo}, {hi}]"
        )
    return a


def _pool_taps(a: np.ndarray, g: PdpGeometry, fill: int, reduce) -> np.ndarray:
    """``reduce`` (``np.maximum``, ``np.minimum``, ``np.add``) over every window of the cube(s)
    padded with ``fill``: ``[..., C, OH, OW]``.

    One strided slice of the padded cube per kernel tap (at most 8 x 8), each combined with the
    running result over every output position at once: no loop over pixels or channels.
    """
    lead = [(0, 0)] * (a.ndim - 2)
    padded = np.pad(
        a,
        (*lead, (g.pad_top, g.pad_bottom), (g.pad_left, g.pad_right)),
        constant_values=fill,
    )
    h_end = (g.out_height - 1) * g.stride_height + 1
    w_end = (g.out_width - 1) * g.stride_width + 1
    out = None
    for i in range(g.kernel_height):
        for j in range(g.kernel_width):
            tap = padded[..., i : i + h_end : g.stride_height, j : j + w_end : g.stride_width]
            out = tap.copy() if out is None else reduce(out, tap, out=out)
    return out


def _real_counts(n_out: int, stride: int, pad: int, kernel: int, size: int) -> np.ndarray:
    """Per output position: how many of the window's rows (or columns) lie inside the cube."""
    start = np.arange(n_out) * stride - pad
    return np.clip(start + kernel, 0, size) - np.clip(start, 0, size)


def _average(a: np.ndarray, regs: PdpRegisters) -> np.ndarray:
    g = regs.geometry()
    int8 = regs.input_type is Precision.INT8
    s = _pool_taps(a, g, 0, np.add)  # <= 64 values of 16 bits: |s| < 2^22
    rows = _real_counts(g.out_height, g.stride_height, g.pad_top, g.kernel_height, g.height)
    cols = _real_counts(g.out_width, g.stride_width, g.pad_left, g.kernel_width, g.width)
    pad = np.asarray(regs.pad_values(), dtype=np.int64)  # pad[0] = 0: no padding, no term
    nr = g.kernel_height - rows  # padded rows per output row
    nc = g.kernel_width - cols  # padded columns per output column
    # Per real row PAD_VALUE_<nc>X, per window kw * PAD_VALUE_<nr>X: each term < 8 * 2^31.
    s = s + rows[:, None] * pad[nc][None, :] + g.kernel_width * pad[nr][:, None]
    s = wrap(s, 16 if int8 else 32)  # the accumulator wraps (associative: wrap of exact sum)
    # |s| <= 2^31, reciprocals < 2^17: products < 2^48, then < 2^33 * 2^17 = 2^50.
    t = shift_right_round_half_away(s * regs.RECIP_KERNEL_WIDTH, 16)
    t = shift_right_round_half_away(t * regs.RECIP_KERNEL_HEIGHT, 16)
    return wrap(t, 8 if int8 else 16)  # the output is wrapped, not saturated


def pdp(x, regs: PdpRegisters) -> np.ndarray:
    """Pool the ``[C, H, W]`` cube ``x`` as ``regs.POOLING_METHOD`` says; ``[C, OH, OW]`` out.

    A batch ``[N, C, H, W]`` is pooled image by image with the same registers (``[N, C, OH,
    OW]`` out); the images are independent, so this is the per-image result stacked.
    ``INPUT_DATA = 2`` (FP16): float16 X (or raw uint16 words), int16 output words, computed by
    :func:`~quantemu.backends.nvdla.fp16.pdp.pdp_fp16`.
    """
    if regs.input_type is Precision.FP16:  # NVIDIA's C model's fp16/fp17 arithmetic
        return pdp_fp16(x, regs)
    method = regs.method
    # max/min are exact in any dtype: int8 codes pool as int8, without widening
    a = _check_input(x, regs, widen=method is PoolingMethod.AVERAGE)
    g = regs.geometry()
    if method is PoolingMethod.AVERAGE:
        y = _average(a, regs)
    else:
        # Padding is ignored by max/min: pad with a value no input reaches (pads < kernel, so
        # every window holds at least one real value).
        # In a narrow dtype its own end does: max(real values, dtype min) = max(real values).
        info = np.iinfo(a.dtype)
        sentinel = info.min if method is PoolingMethod.MAX else info.max
        if a.dtype == np.int64:
            sentinel = -(1 << 40) if method is PoolingMethod.MAX else 1 << 40
        y = _pool_taps(a, g, sentinel, np.maximum if method is PoolingMethod.MAX else np.minimum)
    dtype = np.int8 if regs.input_type is Precision.INT8 else np.int16
    return np.asarray(y, dtype=dtype)


def _with_method(regs: PdpRegisters, method: PoolingMethod, func: str) -> PdpRegisters:
    if regs.method is not method:
        raise InvalidInputError(
            f"{func}: POOLING_METHOD = {regs.POOLING_METHOD} ({regs.method.name}) but {func} "
            f"pools by {method.name} (POOLING_METHOD = {int(method)}); use pdp() to follow "
            "the register, or program it consistently"
        )
    return regs


def pdp_avg(x, regs: PdpRegisters) -> np.ndarray:
    """Average pooling; ``regs.POOLING_METHOD`` must be 0 (AVERAGE)."""
    return pdp(x, _with_method(regs, PoolingMethod.AVERAGE, "pdp_avg"))


def pdp_max(x, regs: PdpRegisters) -> np.ndarray:
    """Max pooling; ``regs.POOLING_METHOD`` must be 1 (MAX)."""
    return pdp(x, _with_method(regs, PoolingMethod.MAX, "pdp_max"))


def pdp_min(x, regs: PdpRegisters) -> np.ndarray:
    """Min pooling; ``regs.POOLING_METHOD`` must be 2 (MIN)."""
    return pdp(x, _with_method(regs, PoolingMethod.MIN, "pdp_min"))
