"""The parameters of one NNIE 8-bit logarithmic tensor: its clip value and bit width.

``nnie.md`` §2: a tensor has one clipping value ``c`` (finite, ``> 0``, read as a float64). From
it come ``k = round_half_even(16*log2 c)`` (float64) and ``z = k - 127``. Only 8 bits are
specified; the 16-bit NNIE scheme has no public specification (§8), so ``bits=16`` (or anything
but 8) raises :class:`~quantemu.errors.UnsupportedError`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError

BITS = 8
LEVELS = 128  # indices 0..127 per sign (nnie.md §1)

_NO_16BIT = (
    "16-bit NNIE has no public specification: HiSilicon does not publish its INT16 encoding, and "
    "MQBench's maintainers say the 16-bit parameters are not provided (MQBench issue #33); "
    "quantemu emulates only the 8-bit logarithmic format (bits=8)"
)


def check_bits(bits: object) -> int:
    """Validate a bit width: 8 passes; any other integer is unsupported; a non-integer is invalid.

    >>> check_bits(8)
    8
    """
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral):
        raise InvalidInputError(f"bits must be the integer 8, got {bits!r} ({type(bits).__name__})")
    if int(bits) == 16:
        raise UnsupportedError(f"bits=16 requested: {_NO_16BIT}")
    if int(bits) != BITS:
        raise UnsupportedError(
            f"bits={int(bits)} requested: NNIE has only 8-bit and 16-bit modes, and {_NO_16BIT}"
        )
    return BITS


def check_clip(clip: object, what: str = "clip") -> float:
    """Validate a clip value and return it as a float64 (a float32 widens exactly).

    >>> check_clip(np.float32(0.1))
    0.10000000149011612
    """
    if isinstance(clip, bool) or not isinstance(clip, numbers.Real):
        raise InvalidInputError(
            f"{what} must be a real number (read as a float64), got {clip!r} "
            f"({type(clip).__name__})"
        )
    value = float(clip)
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidInputError(
            f"{what} must be finite and > 0, got {value!r}: it is the largest magnitude of the "
            "tensor (nnie.md §2); use e.g. max|x| of calibration data"
        )
    return value


def clip_exponent(clip: float) -> int:
    """``k = round_half_even(16*log2(clip))``, evaluated in float64 as ``nnie.md`` §2 says.

    ``16*log2(c)`` is never exactly a half-integer, but for ``c`` within a few ulps of
    ``2^((j+1/2)/16)`` the float64 evaluation may land on either side (the page accepts this).

    >>> clip_exponent(3.7), clip_exponent(1.0), clip_exponent(2.0 ** (15 / 16))
    (30, 0, 15)
    """
    return int(np.rint(16.0 * np.log2(np.float64(clip))))


@dataclass(frozen=True)
class LogQuantParams:
    """One NNIE tensor's quantization parameters (validated; ``k`` and ``z`` derived).

    >>> p = LogQuantParams(3.7)
    >>> p.k, p.z
    (30, -97)
    """

    clip: float
    bits: int = BITS

    def __post_init__(self) -> None:
        object.__setattr__(self, "bits", check_bits(self.bits))
        object.__setattr__(self, "clip", check_clip(self.clip))

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], where: str = "nnie") -> LogQuantParams:
        """Build from a mapping with exactly the keys ``clip`` and ``bits`` (unknown or missing
        keys are an :class:`InvalidInputError`).

        >>> LogQuantParams.from_attrs({"clip": 2.0, "bits": 8}).z
        -111
        """
        names = {"clip", "bits"}
        unknown, missing = sorted(set(attrs) - names), sorted(names - set(attrs))
        if unknown or missing:
            raise InvalidInputError(
                f"{where}: attributes must be exactly clip and bits "
                f"(unknown: {unknown or 'none'}, missing: {missing or 'none'})"
            )
        return cls(attrs["clip"], attrs["bits"])

    @property
    def k(self) -> int:
        """``round_half_even(16*log2 clip)``: the largest level is ``2^(k/16)``."""
        return clip_exponent(self.clip)

    @property
    def z(self) -> int:
        """``k - 127``: the smallest positive level is ``2^(z/16)``."""
        return self.k - (LEVELS - 1)
