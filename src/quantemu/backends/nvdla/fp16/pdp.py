"""PDP pooling of FP16 data, as NVIDIA's C model computes it (nvdla/hw ``nvdlav1`` @ ``8e06b1b9``).

The arithmetic is ``hls_wrapper/pdp_hls_wrapper.cpp`` (``HLS_PDP_PoolingStage0Calc_FP16_W``,
``_FP16_H``, ``HLS_PDP_PoolingStage1Calc_FP16``); the order of the taps and the choice of the pad
values are the sequencer's (``pdp/NV_NVDLA_pdp.cpp``: ``LineOperation``, ``PoolingStage0Calc``,
``PoolingStage1Calc``). Every operation is the cmod's own (:mod:`quantemu.intmath.nvdla_float`):

- MAX / MIN compare raw fp16 words with ``FpMax/FpMin<5,10>`` (-0 < +0; a NaN operand wins, the
  first if both are); padding is ignored. Along the width the running value comes first, along
  the height the new row does.
- AVERAGE works in fp17 (``FpAdd<6,10>``, round half to even; fp16 Inf becomes the fp17 maximum).
  Along the width, per real row: ``acc = add(acc, fp17(x))`` over the window's real columns in
  order, then ``acc = add(add(acc, pad_l), pad_r)`` after every column, where ``pad_l``/``pad_r``
  are ``PAD_VALUE_<#missing columns>X`` on the column that closes the left/right edge, else +0.
  Along the height the same with the row sums (new row first), the pads being
  ``mul(PAD_VALUE_<#missing rows>X, kernel_width)`` in fp17. Then
  ``Fp17ToFp16(mul(mul(acc, RECIP_KERNEL_WIDTH), RECIP_KERNEL_HEIGHT))``.
- ``PAD_VALUE_<n>X`` (low 17 bits) and ``RECIP_KERNEL_*`` are fp17 bit patterns, used as they are.
- With ``FLYING_MODE = 1`` (OFF: X read from memory) and ``NAN_TO_ZERO = 1`` an input NaN is +0.

Refused: average pooling with ``KERNEL_WIDTH = 7`` (width 8) and top or bottom padding; the cmod
reads ``kernel_width_map[8]`` past its 8 entries there (undefined behaviour), see
:func:`check_supported`. Windows are reduced tap by tap over every output at once (at most 8
taps per axis); no loop over pixels or channels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod, Precision
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath.nvdla_float import (
    fp16_max_nvdla,
    fp16_min_nvdla,
    fp16_to_fp17_nvdla,
    fp17_add_rne_nvdla,
    fp17_mul_rne_nvdla,
    fp17_to_fp16_rne_sat_nvdla,
)

__all__ = ["KERNEL_WIDTH_FP17", "check_supported", "fp16_words", "pdp_fp16"]

#: ``kernel_width_map`` of pdp_hls_wrapper.cpp (fp17 0.0, 1.0, ..., 7.0), indexed by the kernel
#: width; entry 8 (8.0) is not the cmod's (it reads past the table) and multiplies only +0 here.
KERNEL_WIDTH_FP17 = (0x0000, 0x7C00, 0x8000, 0x8200, 0x8400, 0x8500, 0x8600, 0x8700, 0x8800)


def check_supported(regs: PdpRegisters) -> None:
    """Refuse what the cmod leaves undefined: average pooling, kernel width 8, top/bottom pad."""
    g = regs.geometry()
    if regs.method is PoolingMethod.AVERAGE and g.kernel_width == 8 and (g.pad_top or g.pad_bottom):
        raise UnsupportedError(
            f"{regs.UNIT}: FP16 average pooling with KERNEL_WIDTH = 7 (width 8) and PAD_TOP = "
            f"{g.pad_top} / PAD_BOTTOM = {g.pad_bottom}: NVIDIA's C model multiplies the "
            "top/bottom pad value by kernel_width_map[8], an out-of-bounds read of its 8-entry "
            "table (pdp_hls_wrapper.cpp, undefined behaviour), so the result is not defined; "
            "use a kernel width of at most 7, or no top/bottom padding"
        )


def fp16_words(x, regs: PdpRegisters, func: str = "pdp") -> np.ndarray:
    """``x`` (float16 values or raw uint16 words, ``[C, H, W]`` or ``[N, C, H, W]``) as uint16
    words, checked."""
    g = regs.geometry()
    shape = (g.channels, g.height, g.width)
    a = np.asarray(x)
    if a.dtype not in (np.float16, np.uint16) or a.shape[-3:] != shape or a.ndim not in (3, 4):
        raise InvalidInputError(
            f"{func}: INPUT_DATA = FP16: X must be a float16 array (or raw uint16 fp16 words) "
            f"of shape (C, H, W) = {shape} (CUBE_IN_CHANNEL/HEIGHT/WIDTH + 1), or (N, C, H, W) "
            f"for a batch, got dtype {a.dtype} shape {a.shape}"
        )
    return a.view(np.uint16)


@dataclass(frozen=True)
class _Tap:
    """Kernel position ``k`` along one axis, for every output index: the input index (clipped),
    whether it is real, and the fp17 pad words added after it (low edge, high edge; else +0)."""

    index: np.ndarray
    valid: np.ndarray
    pad_lo: np.ndarray
    pad_hi: np.ndarray


def _taps(n_out: int, stride: int, pad: int, kernel: int, size: int, *, pad17) -> list[_Tap]:
    """NV_NVDLA_pdp.cpp 1446-1447 (width) and 1558-1559 (height); the width's extra
    ``pad_left != 0`` term is implied by ``i < k`` (``i = o * stride - pad + k``)."""
    o = np.arange(n_out, dtype=np.int64)
    p = np.asarray(pad17, dtype=np.uint32)
    taps = []
    for k in range(kernel):
        i = o * stride - pad + k
        last = i + 1 == size
        add_lo = (i + 1 < kernel) & ((k + 1 == kernel) | (last & (i < k)))
        add_hi = ~add_lo & (i + kernel - k > size) & last
        lo = np.where(add_lo, p[np.clip(kernel - i - 2, 0, 6)], 0).astype(np.uint32)
        hi = np.where(add_hi, p[np.clip(kernel - k - 2, 0, 6)], 0).astype(np.uint32)
        taps.append(_Tap(np.clip(i, 0, size - 1), (i >= 0) & (i < size), lo, hi))
    return taps


def _reduce(src: np.ndarray, axis: int, taps: list[_Tap], combine, pads: bool) -> np.ndarray:
    """Fold the taps in order along ``axis``: the first real one starts, later real ones
    ``combine(acc, v)``; with ``pads``, ``add(add(., pad_lo), pad_hi)`` after each."""
    shape = (-1,) + (1,) * (-1 - axis)  # the output index runs along ``axis``
    acc = started = None
    for t in taps:
        v = np.take(src, t.index, axis=axis)
        valid = t.valid.reshape(shape)
        s = v if acc is None else np.where(started, combine(acc, v), v)
        if pads:
            lo, hi = t.pad_lo.reshape(shape), t.pad_hi.reshape(shape)
            s = fp17_add_rne_nvdla(fp17_add_rne_nvdla(s, lo), hi)
        acc = s if acc is None else np.where(valid, s, acc)
        started = valid if started is None else started | valid
    return acc


def _flush_nan(words: np.ndarray, regs: PdpRegisters) -> np.ndarray:
    if regs.FLYING_MODE == 1 and regs.NAN_TO_ZERO == 1:  # NV_NVDLA_pdp.cpp 543-551
        nan = (words & 0x7C00 == 0x7C00) & (words & 0x03FF != 0)
        return np.where(nan, np.uint16(0), words)
    return words


def pdp_fp16(x, regs: PdpRegisters) -> np.ndarray:
    """Pool the FP16 cube ``x`` as ``regs.POOLING_METHOD`` says; int16 output words
    ``[..., C, OH, OW]`` (the fp16 bit patterns)."""
    if regs.input_type is not Precision.FP16:
        raise InvalidInputError(f"pdp_fp16: INPUT_DATA = {regs.INPUT_DATA}, not 2 (FP16)")
    check_supported(regs)
    words = _flush_nan(fp16_words(x, regs), regs)
    g = regs.geometry()
    pad17 = regs.pad_values_fp17()
    w_taps = _taps(g.out_width, g.stride_width, g.pad_left, g.kernel_width, g.width, pad17=pad17)
    h_taps = _taps(g.out_height, g.stride_height, g.pad_top, g.kernel_height, g.height, pad17=pad17)
    if regs.method is not PoolingMethod.AVERAGE:
        cmp = fp16_max_nvdla if regs.method is PoolingMethod.MAX else fp16_min_nvdla
        rows = _reduce(words, -1, w_taps, cmp, pads=False)
        y = _reduce(rows, -2, h_taps, lambda acc, row: cmp(row, acc), pads=False)
        return y.astype(np.uint16).view(np.int16)
    kw17 = np.uint32(KERNEL_WIDTH_FP17[g.kernel_width])
    h_taps = [  # the height's pads are PAD_VALUE * kernel width, in fp17 (+0 stays +0)
        replace(
            t, pad_lo=fp17_mul_rne_nvdla(t.pad_lo, kw17), pad_hi=fp17_mul_rne_nvdla(t.pad_hi, kw17)
        )
        for t in h_taps
    ]
    rows = _reduce(fp16_to_fp17_nvdla(words), -1, w_taps, fp17_add_rne_nvdla, pads=True)
    acc = _reduce(rows, -2, h_taps, lambda acc, row: fp17_add_rne_nvdla(row, acc), pads=True)
    acc = fp17_mul_rne_nvdla(acc, np.uint32(regs.RECIP_KERNEL_WIDTH))
    acc = fp17_mul_rne_nvdla(acc, np.uint32(regs.RECIP_KERNEL_HEIGHT))
    return fp17_to_fp16_rne_sat_nvdla(acc).astype(np.uint16).view(np.int16)
