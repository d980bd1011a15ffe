"""Scalar twin of :mod:`quantemu.backends.nvdla.pdp_fp16`: one output at a time, in cmod words.

Python ints and the scalar float primitives of :mod:`quantemu.intmath.reference_nvdla_float`;
the loops follow ``NV_NVDLA_pdp.cpp`` (nvdla/hw ``nvdlav1`` @ ``8e06b1b9``): ``LineOperation``
(1425-1517) for the width, ``PoolingStage0Calc`` (1523-1636) for the height and
``PoolingStage1Calc`` (1640-1748) for the output, with the HLS cores of
``hls_wrapper/pdp_hls_wrapper.cpp``. Slow; it is the specification the vectorised module is
tested against.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.pdp_fp16 import KERNEL_WIDTH_FP17, check_supported, fp16_words
from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod
from quantemu.intmath import reference_nvdla_float as rf

__all__ = ["pdp_fp16_reference"]


def _f16_cmp(a: int, b: int, method: PoolingMethod) -> int:
    return rf.fp_cmp(a, b, rf.FP16, maximum=method is PoolingMethod.MAX)


def _add(a: int, b: int) -> int:
    return rf.fp_add(a, b, rf.FP17)


def _mul(a: int, b: int) -> int:
    return rf.fp_mul(a, b, rf.FP17)


def _line(row: list[int], ow: int, regs: PdpRegisters) -> int:
    """LineOperation over the window's real columns of one input row (``HLS_..._FP16_W``)."""
    g, pad = regs.geometry(), regs.pad_values_fp17()
    kw, W, pl = g.kernel_width, g.width, g.pad_left
    start = ow * g.stride_width - pl
    acc = 0
    for w in range(max(0, start), min(W - 1, start + kw - 1) + 1):
        k = pl + w - ow * g.stride_width  # kernel_width_iter
        first = w == 0 or k == 0
        add_left = (w + 1 < kw) and ((k + 1 == kw) or ((w + 1 == W) and (w < k) and pl != 0))
        add_right = (not add_left) and (w + kw - k > W) and (w + 1 == W)
        pad_left = pad[kw - (w + 1) - 1] if add_left else 0
        pad_right = pad[kw - (k + 1) - 1] if add_right else 0
        if regs.method is PoolingMethod.AVERAGE:
            x17 = rf.fp16_to_fp17(row[w])
            v = x17 if first else _add(acc, x17)
            acc = _add(_add(v, pad_left), pad_right)
        else:
            acc = row[w] if first else _f16_cmp(acc, row[w], regs.method)
    return acc


def _output(x: list[list[int]], oh: int, ow: int, regs: PdpRegisters) -> int:
    """PoolingStage0Calc over the window's real rows (``HLS_..._FP16_H``), then Stage1."""
    g, pad = regs.geometry(), regs.pad_values_fp17()
    kh, H, pt = g.kernel_height, g.height, g.pad_top
    kw17 = KERNEL_WIDTH_FP17[g.kernel_width]
    start = oh * g.stride_height - pt
    acc = 0
    for h in range(max(0, start), min(H - 1, start + kh - 1) + 1):
        kk = pt + h - oh * g.stride_height  # kernel_height_iter
        row = _line(x[h], ow, regs)
        first = h == 0 or kk == 0
        add_top = (h + 1 < kh) and ((kk + 1 == kh) or ((h + 1 == H) and (h < kk)))
        add_bottom = (not add_top) and (h + kh - kk > H) and (h + 1 == H)
        pad_top = _mul(pad[kh - (h + 1) - 1] if add_top else 0, kw17)
        pad_bottom = _mul(pad[kh - (kk + 1) - 1] if add_bottom else 0, kw17)
        if regs.method is PoolingMethod.AVERAGE:
            v = row if first else _add(row, acc)
            acc = _add(_add(v, pad_top), pad_bottom)
        else:
            acc = row if first else _f16_cmp(row, acc, regs.method)
    if regs.method is not PoolingMethod.AVERAGE:
        return acc
    acc = _mul(_mul(acc, regs.RECIP_KERNEL_WIDTH), regs.RECIP_KERNEL_HEIGHT)
    return rf.fp17_to_fp16(acc)


def pdp_fp16_reference(x, regs: PdpRegisters) -> np.ndarray:
    """Same contract as :func:`~quantemu.backends.nvdla.pdp_fp16.pdp_fp16`, output by output."""
    check_supported(regs)
    words = fp16_words(x, regs)
    g = regs.geometry()
    flush = regs.FLYING_MODE == 1 and regs.NAN_TO_ZERO == 1
    out = np.zeros((*words.shape[:-2], g.out_height, g.out_width), dtype=np.uint16)
    for lead in np.ndindex(*words.shape[:-2]):  # (n,) c
        cube = [[int(v) for v in line] for line in words[lead]]
        if flush:
            cube = [[0 if v & 0x7C00 == 0x7C00 and v & 0x3FF else v for v in r] for r in cube]
        for oh in range(g.out_height):
            for ow in range(g.out_width):
                out[(*lead, oh, ow)] = _output(cube, oh, ow, regs)
    return out.view(np.int16)
