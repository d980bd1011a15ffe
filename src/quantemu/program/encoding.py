"""How a backend stores a tensor between layers, and how that storage maps back to floats.

Every tensor that flows between lowered layers is a :class:`QTensor`: the integer codes the
target holds in memory plus the :class:`Encoding` that gives them meaning. The simulator never
interprets codes itself; it asks the encoding to

- ``dequantize`` codes to float32 (to compare with the float model),
- ``quantize`` float values to the codes an ideal quantizer with the same parameters would
  produce (to measure the error of a layer in output LSBs); ``target_quantize`` is what the
  target itself does (graph inputs, float fallbacks; the same unless a backend overrides it),
- ``lsb_index`` codes to an int64 index on which one step is one LSB (for a linear encoding the
  code itself; for NNIE's logarithmic codes the signed level index).

Linear (affine) encodings are shared by xs3, nvdla and onednn; NNIE defines its logarithmic one
in its own backend. ``check_codes`` says why an array cannot hold a tensor of the encoding
(wrong dtype, codes out of range); :meth:`~quantemu.program.layer.Layer.run` applies it to
every layer's output.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from quantemu.errors import InvalidInputError

_INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(2**31), 2**31 - 1),
}


class Encoding(abc.ABC):
    """The meaning of a tensor's integer codes (see the module docstring)."""

    @abc.abstractmethod
    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        """Float32 values of ``codes`` (NCHW or whatever layout the graph uses)."""

    @abc.abstractmethod
    def quantize(self, values: np.ndarray) -> np.ndarray:
        """The codes an ideal quantizer with these parameters gives for float ``values``."""

    def target_quantize(self, values: np.ndarray) -> np.ndarray:
        """The codes the target's own quantizer produces for float ``values``.

        Used for graph inputs and for float fallbacks that requantize their result.

        Defaults to :meth:`quantize`; a backend whose input quantizer differs from the ideal
        one (e.g. PyTorch's fused multiply-add in ``quantize_per_tensor``) overrides this, so
        that :meth:`quantize` stays the ideal reference the LSB error is measured against.
        """
        return self.quantize(values)

    #: True when the levels are spaced in proportion to their magnitude (a logarithmic grid,
    #: NNIE's): quantization-aware training's straight-through gradient then follows the grid,
    #: d(level)/dx = level / x, instead of the identity of an evenly spaced grid.
    logarithmic: ClassVar[bool] = False

    @abc.abstractmethod
    def lsb_index(self, codes: np.ndarray) -> np.ndarray:
        """int64 positions of ``codes`` on a grid where adjacent levels differ by one."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for reports, e.g. ``int8 scale=0.0123 zp=-3``."""

    def check_codes(self, codes: object) -> str | None:
        """Why ``codes`` cannot be a tensor of this encoding, or None when they can.

        The base check: an integer NumPy array. Encodings with a storage dtype check it too.
        """
        if not isinstance(codes, np.ndarray) or codes.dtype.kind not in "iu":
            kind = codes.dtype if isinstance(codes, np.ndarray) else type(codes).__name__
            return f"codes must be an integer array, got {kind}"
        return None


@dataclass(frozen=True)
class LinearEncoding(Encoding):
    """``value = scale * (code - zero_point)``, codes of ``dtype``.

    ``scale`` and ``zero_point`` are scalars, or 1-D arrays along ``axis`` (per channel).
    ``quantize`` rounds half to even and saturates to the dtype range (the ideal quantizer the
    LSB error is measured against; it is not any target's own rounding).
    """

    scale: float | np.ndarray
    zero_point: int | np.ndarray = 0
    dtype: str = "int8"
    axis: int | None = None
    lo: int = field(init=False)
    hi: int = field(init=False)

    def __post_init__(self) -> None:
        if self.dtype not in _INT_RANGES:
            raise InvalidInputError(
                f"LinearEncoding: dtype {self.dtype!r} is not one of {', '.join(_INT_RANGES)}"
            )
        scale = np.asarray(self.scale, dtype=np.float64)
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise InvalidInputError(
                f"LinearEncoding: scale must be finite and > 0, got {self.scale!r}; a constant "
                "tensor (calibrated range of zero width) needs a positive scale such as 1.0"
            )
        if (scale.ndim > 0) != (self.axis is not None):
            raise InvalidInputError(
                "LinearEncoding: a per-channel scale needs axis, a scalar scale must not have one"
            )
        lo, hi = _INT_RANGES[self.dtype]
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def _broadcast(self, value, ndim: int) -> np.ndarray:
        value = np.asarray(value)
        if self.axis is None or value.ndim == 0:
            return value
        shape = [1] * ndim
        shape[self.axis] = value.shape[0]
        return value.reshape(shape)

    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes)
        zp = self._broadcast(self.zero_point, codes.ndim).astype(np.int64)
        scale = self._broadcast(self.scale, codes.ndim).astype(np.float64)
        return ((codes.astype(np.int64) - zp) * scale).astype(np.float32)

    def quantize(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        zp = self._broadcast(self.zero_point, values.ndim)
        scale = self._broadcast(self.scale, values.ndim).astype(np.float64)
        codes = np.rint(values / scale) + zp
        return np.clip(codes, self.lo, self.hi).astype(np.dtype(self.dtype))

    def lsb_index(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(codes).astype(np.int64)

    def check_codes(self, codes: object) -> str | None:
        """The codes must have the encoding's dtype (which bounds their range) and, per
        channel, as many channels along ``axis`` as there are scales."""
        problem = super().check_codes(codes)
        if problem is not None or not isinstance(codes, np.ndarray):
            return problem
        if codes.dtype != np.dtype(self.dtype):
            return f"codes have dtype {codes.dtype}, the encoding stores {self.dtype}"
        if self.axis is not None:
            channels = np.asarray(self.scale).shape[0]
            if codes.ndim <= self.axis or codes.shape[self.axis] != channels:
                return (
                    f"codes of shape {codes.shape} do not have {channels} channels along axis "
                    f"{self.axis} (one per scale)"
                )
        return None

    def describe(self) -> str:
        if self.axis is None:
            return f"{self.dtype} scale={float(self.scale):.6g} zp={int(self.zero_point)}"
        return f"{self.dtype} per-channel (axis {self.axis}) scales"


@dataclass(frozen=True)
class QTensor:
    """Integer ``codes`` as the target stores them, and their :class:`Encoding`."""

    codes: np.ndarray
    encoding: Encoding

    def dequantize(self) -> np.ndarray:
        """The float32 values the codes stand for."""
        return self.encoding.dequantize(self.codes)
