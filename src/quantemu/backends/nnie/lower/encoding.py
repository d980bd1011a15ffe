"""How lowered NNIE tensors are stored: 8-bit logarithmic codes (:class:`LogEncoding`).

Every tensor between lowered NNIE layers holds uint8 true-form codes (``nnie.md`` §1): bit 7
the sign, bits 6..0 the index ``i`` of the level ``2^((i+z)/16)``, ``0x80`` zero. The encoding
is the tensor's clip (a gfpq table value); :func:`quantize_counted` quantizes with it and counts
what the quantization lost (saturation at the top level, underflow to zero).

**The LSB index.** Reports measure errors in "LSBs": steps between adjacent representable
values. The representable values of one encoding, in increasing order, are
``-L(127) < ... < -L(1) < 0 < L(0) < L(1) < ... < L(127)`` (a negative code has index 1..127:
``0x80`` is zero, so ``-L(0)`` does not exist). :meth:`LogEncoding.lsb_index` numbers them
consecutively with zero at 0:

====================  ===========  =========
code                  value        lsb_index
====================  ===========  =========
``0x80 | i`` (i>=1)   ``-L(i)``    ``-i``
``0x80``              ``0``        ``0``
``i`` (0..127)        ``+L(i)``    ``i + 1``
====================  ===========  =========

so every pair of adjacent representable values differs by exactly 1 (range -127..128); one
step away from zero is one LSB on both sides. (Two codes one index apart are about 4.4 % apart in
value: a step of 2^(1/16).)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from quantemu.backends.nnie import grid
from quantemu.backends.nnie.ops import CODE_ZERO, SIGN_BIT, dequantize_z, quantize_z
from quantemu.backends.nnie.params import LEVELS, LogQuantParams
from quantemu.program.encoding import Encoding

INDEX_MASK = 0x7F


@dataclass(frozen=True)
class LogEncoding(Encoding):
    """NNIE 8-bit logarithmic codes with clip ``clip`` (``k = round(16*log2 clip)``, ``z = k-127``).

    ``quantize`` is :func:`~quantemu.backends.nnie.ops.log_quantize` (exact, ``nnie.md`` §3; it
    takes float32 and rejects NaN), ``dequantize`` is
    :func:`~quantemu.backends.nnie.ops.log_dequantize`; ``lsb_index`` is described in the module
    docstring.

    >>> enc = LogEncoding(1.0)
    >>> codes = enc.quantize(np.array([-1.0, 0.0, 0.5, 1.0], np.float32))
    >>> [hex(c) for c in codes], enc.lsb_index(codes).tolist(), enc.dequantize(codes).tolist()
    (['0xff', '0x80', '0x6f', '0x7f'], [-127, 0, 112, 128], [-1.0, 0.0, 0.5, 1.0])
    >>> enc.lsb_index(np.array([0x81, 0x80, 0x00], np.uint8)).tolist()
    [-1, 0, 1]
    >>> enc.describe()
    'nnie log8 clip=1 (k=0, z=-127)'
    """

    clip: float
    bits: int = 8
    params: LogQuantParams = field(init=False, repr=False, compare=False)
    logarithmic: ClassVar[bool] = True  # levels 2^(1/16) apart: a relative grid
    _k: int = field(init=False, repr=False, compare=False)  # derived once: read on every run

    def __post_init__(self) -> None:
        params = LogQuantParams(self.clip, self.bits)  # validates clip and bits
        object.__setattr__(self, "clip", params.clip)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "_k", params.k)

    @property
    def k(self) -> int:
        """``round_half_even(16*log2 clip)``: the top level is ``2^(k/16)``."""
        return self._k

    @property
    def z(self) -> int:
        """``k - 127``: the smallest positive level is ``2^(z/16)``."""
        return self._k - (LEVELS - 1)

    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        return dequantize_z(codes, self.z)  # clip and bits were validated at construction

    def quantize(self, values: np.ndarray) -> np.ndarray:
        return quantize_z(np.asarray(values, dtype=np.float32), self.z)

    def lsb_index(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes).astype(np.int64)
        index = codes & INDEX_MASK
        return np.where(codes & SIGN_BIT, -index, index + 1)

    def describe(self) -> str:
        return f"nnie log8 clip={self.clip:.6g} (k={self.k}, z={self.z})"

    def check_codes(self, codes: object) -> str | None:
        """Codes are stored as uint8 (every byte is a valid code: ``0x80`` is zero)."""
        problem = super().check_codes(codes)
        if problem is None and isinstance(codes, np.ndarray) and codes.dtype != np.uint8:
            return f"codes have dtype {codes.dtype}, NNIE stores uint8"
        return problem


@functools.lru_cache(maxsize=256)
def saturation_threshold_bits(k: int) -> int:
    """Bit pattern ``T`` of the first float32 above the top level's rounding interval.

    A value saturates at the top index 127 (code ``0x7F``/``0xFF``) exactly when
    ``round(16*log2|x|) > k``, i.e. ``16*log2|x| > k + 1/2``, i.e. ``|x| > 2^((2k+1)/32)``;
    that point is irrational (``2k+1`` is odd), so no float32 equals it and the test is
    ``bits(|x|) >= T`` with ``T = first_float32_at_least(2k+1)`` (exact, :mod:`.grid`).

    >>> hex(saturation_threshold_bits(0))  # 2^(1/32) = 1.0219...
    '0x3f82cd87'
    """
    return int(grid.first_float32_at_least(np.array([2 * k + 1]))[0])


def quantize_counted(values: np.ndarray, encoding: LogEncoding) -> tuple[np.ndarray, int, int]:
    """Log-quantize float32 ``values``; return ``(codes, clipped, underflow_to_zero)``.

    ``clipped``: elements saturated at the top level (their unclamped index exceeds 127, see
    :func:`saturation_threshold_bits`; infinities included). ``underflow_to_zero``: nonzero
    values that became ``0x80`` (too small for the smallest level, or negative above ``-N``).

    >>> codes, clipped, under = quantize_counted(
    ...     np.array([3.0, -1.0, 1e-9, 0.0, 0.99], np.float32), LogEncoding(1.0))
    >>> [hex(c) for c in codes], clipped, under
    (['0x7f', '0xff', '0x80', '0x80', '0x7f'], 1, 1)
    """
    values = np.ascontiguousarray(values, dtype=np.float32)
    codes = encoding.quantize(values)  # rejects NaN: every comparison below is ordered
    bits = values.reshape(-1).view(np.uint32)
    threshold = saturation_threshold_bits(encoding.k)
    clipped = 0
    if values.size and _may_saturate(values, threshold):
        clipped = int(np.count_nonzero((bits & np.uint32(0x7FFFFFFF)) >= threshold))
    zeros_out = int(np.count_nonzero(codes == CODE_ZERO))
    # Bit patterns, not float == 0: exact even where denormals are treated as zero.
    zeros_in = int(np.count_nonzero(bits == 0)) + int(np.count_nonzero(bits == SIGN_MASK))
    return codes, clipped, zeros_out - zeros_in


SIGN_MASK = 0x80000000
NORMAL_MIN_BITS = 0x00800000  # the smallest normal float32, 2^-126


def _may_saturate(values: np.ndarray, threshold: int) -> bool:
    """False when no element of NaN-free ``values`` can reach ``threshold`` (bits of ``|x|``).

    Saturation is rare, so two fast float reductions usually rule it out and save the exact
    magnitude pass. A normal or infinite threshold compares exactly as a float (denormals are
    below it whether or not they are flushed); a subnormal one always takes the exact pass.
    """
    if threshold < NORMAL_MIN_BITS:
        return True
    limit = np.uint32(threshold).view(np.float32)
    return bool(values.max() >= limit or values.min() <= -limit)
