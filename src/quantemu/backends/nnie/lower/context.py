"""The NNIE lowering context: MQBench's NNIE clip rule applied to calibrated ranges and weights.

MQBench's NNIE flow (``notes/toolchains.md``) gives every activation tensor one clip, the running
``max(|min|, |max|)`` seen during calibration, and every weight tensor ``max|w|`` (its weights are
clipped to ``[-c, c]`` before export). NNIE's mapper wants a gfpq table value, so the clip is
snapped to ``c_k = 2^(k/16)`` with ``k = round(16*log2 c)`` (:func:`.cliptable.snap_clip`), which
never changes a code.

QDQ models (``graph.quant_overrides``) fix a linear scale and zero point, which NNIE's logarithmic
grid cannot represent: by default that is an error; with ``quant_overrides="range"`` the
override's representable range ``scale * max(|qmin - zp|, |qmax - zp|)`` becomes the clip.

:class:`NnieContext` derives those clips (as :class:`LogEncoding`) and keeps, in ``encodings``,
how each tensor lowered so far is stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, cast

import numpy as np

from quantemu.backends.nnie.cliptable import snap_clip
from quantemu.backends.nnie.lower.encoding import LogEncoding
from quantemu.backends.nnie.lower.options import Options, QuantOverrides
from quantemu.calibration.ranges import TensorRange
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import QuantOverride
from quantemu.program.lowering import LoweringContext

# Any clip quantizes zeros exactly; a tensor that was all zero during calibration gets 1.0.
ZERO_RANGE_CLIP = 1.0


def _int_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def override_max_abs(override: QuantOverride) -> float:
    """The largest magnitude a linear override represents: ``scale * max(|qmin-zp|, |qmax-zp|)``
    (the largest over channels for a per-axis override).

    >>> o = QuantOverride(np.float32(0.5), np.int8(0))
    >>> override_max_abs(o)
    64.0
    """
    qmin, qmax = _int_range(override.dtype)
    zp = np.asarray(override.zero_point, dtype=np.float64)
    reach = np.maximum(np.abs(qmin - zp), np.abs(qmax - zp))
    return float(np.max(np.asarray(override.scale, dtype=np.float64) * reach))


def unsupported_override(name: str, override: QuantOverride) -> UnsupportedError:
    """The error for a QDQ override in the default ``quant_overrides="error"`` mode."""
    scale = np.asarray(override.scale)
    shown = f"scale={scale.tolist()!r}, zero_point={np.asarray(override.zero_point).tolist()!r}"
    return UnsupportedError(
        f"nnie: tensor {name!r} has a QDQ quantization override ({override.dtype}, {shown}, "
        f"from {override.source or 'a Q/DQ pair'}): NNIE stores tensors on a logarithmic grid "
        "(2^(i/16) steps) and cannot represent a linear scale and zero point. Remedies: lower "
        "the float model (without Q/DQ nodes) and calibrate it, or pass "
        "quant_overrides='range' to use each override's representable range as the NNIE clip"
    )


def range_max_abs(name: str, tensor_range: TensorRange) -> float:
    """``max(|min|, |max|)`` of a calibrated range (over channels for a per-channel range)."""
    low = np.asarray(tensor_range.min, dtype=np.float64)
    high = np.asarray(tensor_range.max, dtype=np.float64)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise InvalidInputError(
            f"nnie: the calibrated range of tensor {name!r} is not finite "
            f"(min={tensor_range.min!r}, max={tensor_range.max!r}); calibrate with finite data"
        )
    return float(max(np.max(np.abs(low)), np.max(np.abs(high))))


def clip_encoding(max_abs: float, what: str) -> LogEncoding:
    """The :class:`LogEncoding` for a tensor whose largest magnitude is ``max_abs``: the snapped
    table value (``ZERO_RANGE_CLIP`` for an all-zero tensor).

    >>> clip_encoding(3.7, "t").k, clip_encoding(0.0, "t").clip
    (30, 1.0)
    """
    if not math.isfinite(max_abs):
        raise InvalidInputError(f"nnie: {what} has max|x| = {max_abs!r}; no clip can be chosen")
    value = max_abs if max_abs > 0.0 else ZERO_RANGE_CLIP
    try:
        return LogEncoding(snap_clip(value).snapped)
    except InvalidInputError as exc:
        raise InvalidInputError(f"nnie: {what}: {exc}") from exc


@dataclass
class NnieContext(LoweringContext):
    """The lowering state: each tensor's clip (override, else calibrated range) and, in
    ``encodings``, how each tensor lowered so far is stored."""

    backend: ClassVar[str] = "nnie"

    options: Options
    _clips: dict[str, LogEncoding] = field(default_factory=dict, init=False, repr=False)

    def check_override(self, name: str) -> QuantOverride | None:
        """The override of ``name`` if it may be used; raises in ``"error"`` mode."""
        override = self.graph.quant_overrides.get(name)
        if override is not None and self.options.quant_overrides is not QuantOverrides.RANGE:
            raise unsupported_override(name, override)
        return override

    def activation(self, name: str) -> LogEncoding:
        """The clip of activation tensor ``name``."""
        if name not in self._clips:
            override = self.check_override(name)
            if override is not None:
                max_abs = override_max_abs(override)
            elif name in self.ranges:
                max_abs = range_max_abs(name, self.ranges[name])
            else:
                raise InvalidInputError(
                    f"nnie: no calibrated range for tensor {name!r}; calibrate the graph that is "
                    "lowered (quantemu.calibrate(optimized_graph, data) observes every tensor)"
                )
            self._clips[name] = clip_encoding(max_abs, f"tensor {name!r}")
        return self._clips[name]

    def weight(self, name: str, values: np.ndarray) -> LogEncoding:
        """The clip of weight tensor ``name``: ``max|w|`` (or its override's range)."""
        override = self.check_override(name)
        if override is not None:
            max_abs = override_max_abs(override)
        else:
            max_abs = float(np.max(np.abs(values))) if values.size else 0.0
        return clip_encoding(max_abs, f"weight {name!r}")

    def stored(self, name: str) -> LogEncoding:
        """How tensor ``name`` (a graph input or a lowered layer's output) is stored."""
        return cast(LogEncoding, self.encodings[name])

    def float_constant(self, name: str) -> np.ndarray:
        """Constant ``name`` as float32, used as it is (MQBench's NNIE flow quantizes biases
        and parameters neither); a QDQ constant is an error unless ``quant_overrides="range"``."""
        self.check_override(name)
        return np.asarray(self.graph.initializers[name], dtype=np.float32)
