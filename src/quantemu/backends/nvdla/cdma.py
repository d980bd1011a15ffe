"""The CDMA input converter (``cc_cvt`` in seed 001): mean subtraction and 8/16-bit conversion.

``o = SHR((x - mean) * CVT_SCALE, CVT_TRUNCATE, 17)``, then saturated to the processing
precision (int8 or int16), rounding half away from zero like every NVDLA converter
(``notes/toolchains.md``, NVDLA). The mean is ``CVT_OFFSET`` (the converter's offset register),
or a per-element array (for image input, the per-channel ``MEAN_RY/GU/BV/AX`` values broadcast
over the pixels). With ``CVT_EN = 0`` the data pass unchanged. The compiler programs this
converter as the identity. Not covered by the conformance vectors.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.precision import converter
from quantemu.backends.nvdla.registers import CdmaCvtRegisters, Precision
from quantemu.errors import InvalidInputError
from quantemu.intmath import saturate

__all__ = ["cdma_convert"]


def cdma_convert(x, regs: CdmaCvtRegisters, *, mean=None) -> np.ndarray:
    """Convert input data as the CDMA does; returns int8 or int16 (``PROC_PRECISION``).

    ``mean``: optional integer array broadcast against ``x`` that replaces ``CVT_OFFSET``.
    """
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise InvalidInputError(f"cdma_convert: x must be an integer array, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -(1 << 16) or a.max() >= 1 << 16):
        raise InvalidInputError(
            f"cdma_convert: input values must be 8- or 16-bit data, got [{a.min()}, {a.max()}]"
        )
    bits = 8 if regs.precision is Precision.INT8 else 16
    dtype = np.int8 if bits == 8 else np.int16
    if not regs.CVT_EN:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if a.size and (a.min() < lo or a.max() > hi):
            raise InvalidInputError(
                f"cdma_convert: CVT_EN = 0 passes data unchanged, but x holds values outside "
                f"int{bits}; enable the converter or use PROC_PRECISION = INT16"
            )
        return a.astype(dtype)
    c = regs.converter()
    if mean is None:
        centred = a - c.offset
    else:
        m = np.asarray(mean)
        if m.dtype.kind not in "iu":
            raise InvalidInputError(f"cdma_convert: mean must be integers, got dtype {m.dtype}")
        try:
            centred = a - m.astype(np.int64)
        except ValueError as exc:
            raise InvalidInputError(
                f"cdma_convert: mean of shape {m.shape} does not broadcast against x of shape "
                f"{a.shape}: {exc}"
            ) from None
    # (17-bit - 16-bit) * int16 < 2^33: exact in int64.
    t, _ = converter(centred, offset=0, scale=c.scale, shift=c.shift, bits=17)
    return np.asarray(saturate(t, bits), dtype=dtype)
