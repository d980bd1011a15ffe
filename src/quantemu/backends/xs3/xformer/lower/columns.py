"""Channels-last im2col for ``XC_conv2d_v2``: the columns a GEMM against int8 weights reads.

The rows are ``(kh, kw, C)``-ordered, as xformer lays out its weights: each window copies runs
of ``kw * C`` contiguous bytes (one dilation) instead of ``kw`` bytes per channel, which makes
the copy several times faster than windows over NCHW. The weights are reordered to match once,
at lowering (:func:`gemm_weights`); the exact sum of products does not depend on the order.

The columns are offset binary, ``x + 128`` as uint8 (the sign bit flipped while the input is
copied into the padded buffer anyway): the int8 GEMM engine reads uint8 rows in place, where
int8 ones would cost it a whole pass over the columns. The caller subtracts
``128 * sum_k w[k, o]`` per output channel (:func:`offset_correction`).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided


def gemm_weights(weights: np.ndarray) -> np.ndarray:
    """OIHW int8 weights as the read-only ``(kh * kw * I, O)`` matrix :func:`columns` matches."""
    o = weights.shape[0]
    # an owning read-only copy: matmul_exact caches what it derives from frozen weights
    w = weights.transpose(2, 3, 1, 0).reshape(-1, o).astype(np.int8, order="C", copy=True)
    w.setflags(write=False)
    return w


def offset_correction(gemm: np.ndarray) -> np.ndarray:
    """``128 * sum_k w[k, o]``: what offset-binary columns add to each output channel's sum."""
    return 128 * gemm.sum(axis=0, dtype=np.int64)


def columns(x, kernel, *, strides, dilations, pads, pad_value: int):
    """``(N * OH * OW, kh * kw * C)`` uint8 columns ``x + 128`` of NCHW int8 ``x`` padded
    with ``pad_value`` (``pads``: top, left, bottom, right), and ``(N, OH, OW)``; None for a
    negative (cropping) pad or an empty output, which the generic windows handle."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    top, left, bottom, right = pads
    hp, wp = h + top + bottom, w + left + right
    if min(pads) < 0 or hp < dh * (kh - 1) + 1 or wp < dw * (kw - 1) + 1:
        return None
    xp = np.empty((n, hp, wp, c), np.uint8)
    if top or left or bottom or right:
        xp.fill((pad_value + 128) & 0xFF)
    inner = xp[:, top : top + h, left : left + w]
    np.bitwise_xor(x.transpose(0, 2, 3, 1).view(np.uint8), 0x80, out=inner)  # x + 128
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    if kh == kw == 1 and sh == sw == 1:
        return xp.reshape(n * oh * ow, c), (n, oh, ow)
    s = xp.strides
    win = as_strided(
        xp,
        (n, oh, ow, kh, kw, c),
        (s[0], s[1] * sh, s[2] * sw, s[1] * dh, s[2] * dw, s[3]),
        writeable=False,
    )
    return win.reshape(n * oh * ow, kh * kw * c), (n, oh, ow)


__all__ = ["columns", "gemm_weights", "offset_correction"]
