"""Half-precision storage: tensors a target keeps as IEEE binary16 words (NVDLA's FP16 pipeline).

A target that computes in floating point still stores its tensors in a fixed format, so the
simulator treats them like integer codes: the 16-bit words as ``uint16``, their meaning given by
:class:`Fp16Encoding`. One LSB is one step between adjacent fp16 values (one unit in the last
place), so the report's LSB error reads in fp16 ulps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.program.encoding import Encoding

__all__ = ["FP16", "Fp16Encoding"]


@dataclass(frozen=True)
class Fp16Encoding(Encoding):
    """fp16 words (``uint16`` bit patterns): ``value = float16(word)``.

    ``quantize`` is IEEE round to nearest even (what a host's ``float -> half`` does, and the
    ideal the LSB error is measured against; beyond ±65504 it gives ±Inf). ``lsb_index`` orders
    the words by value, one step per ulp, with ``+0`` and ``-0`` both at 0.

    >>> enc = Fp16Encoding()
    >>> words = enc.quantize(np.array([1.0, -2.5, 65520.0], np.float32))
    >>> [hex(int(w)) for w in words], enc.dequantize(words).tolist()
    (['0x3c00', '0xc100', '0x7c00'], [1.0, -2.5, inf])
    >>> enc.lsb_index(np.array([0x3C01, 0x3C00, 0x8000, 0x8001], np.uint16)).tolist()
    [15361, 15360, 0, -1]
    """

    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(codes).astype(np.uint16, copy=False).view(np.float16).astype(np.float32)

    def quantize(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):  # beyond ±65504 is ±Inf, as IEEE says
            return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)

    def lsb_index(self, codes: np.ndarray) -> np.ndarray:
        w = np.asarray(codes).astype(np.int64) & 0xFFFF
        return np.where(w & 0x8000, -(w & 0x7FFF), w)

    def check_codes(self, codes: object) -> str | None:
        """fp16 words are ``uint16`` arrays."""
        problem = super().check_codes(codes)
        if problem is None and isinstance(codes, np.ndarray) and codes.dtype != np.uint16:
            return f"codes have dtype {codes.dtype}, fp16 words are stored as uint16"
        return problem

    def describe(self) -> str:
        return "fp16 (binary16 words)"


#: The one fp16 encoding (it has no parameters).
FP16 = Fp16Encoding()
