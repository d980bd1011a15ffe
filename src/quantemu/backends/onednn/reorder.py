"""``reorder``: f32 -> s8/u8 quantizing reorder with runtime scales (page §8)."""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.f32 import f32, rr, to_8bit
from quantemu.backends.onednn.params import DstType, ReorderParams
from quantemu.errors import InvalidInputError


def reorder(x: np.ndarray, params: ReorderParams) -> np.ndarray:
    """``y = clamp(rne((x ⊗ src_scale) ⊗ rr(dst_scale)), lo, hi)`` of a float32 ``x``.

    A scale of 1.0 means no scale is attached: the multiplication is then an exact no-op.
    Ties go to even, ±inf and huge values saturate. NaN gives −128 (s8) and 0 (u8), except for
    a u8 plain converting copy (both scales 1.0) on the AVX-512 code paths, which gives 255.

    >>> p = ReorderParams("avx2", "s8")
    >>> reorder(np.array([0.5, 1.5, 2.5, -2.5, 127.5, -128.5], np.float32), p).tolist()
    [0, 2, 2, -2, 127, -128]
    """
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        got = f"{x.dtype.name} array" if isinstance(x, np.ndarray) else type(x).__name__
        raise InvalidInputError(f"reorder: x must be a float32 array, got {got}")
    v = x
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to ±inf saturates, as on x86
        if params.src_scale != 1.0:
            v = v * f32(params.src_scale)
        if params.dst_scale != 1.0:
            v = v * rr(f32(params.dst_scale))
    y = to_8bit(v, signed=params.dst_dt is DstType.S8)
    plain_copy = params.src_scale == 1.0 and params.dst_scale == 1.0
    if params.dst_dt is DstType.U8 and plain_copy and params.isa.avx512:
        # The AVX-512 plain u8 conversion maps NaN to 255 (page §8). AMX is assumed to share
        # the avx512_core path here (not covered by the vectors).
        y[np.isnan(x)] = 255
    return y
