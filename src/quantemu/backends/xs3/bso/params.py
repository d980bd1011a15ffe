"""Frozen, validated parameters of the XS3 operators (``conformance/xs3.md`` sections 1-2).

Field names follow lib_nn's C API (``nn_window_params_t``, ``y_params``) and the conformance
attributes, so a vector's ``attrs`` map one to one onto these classes. Every constructor checks
types and ranges; ``from_attrs`` also rejects unknown keys (DESIGN principle 5). The variant that
changes results, host reference versus device, is the :class:`Model` enum.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quantemu.errors import InvalidInputError, choose


class Model(enum.Enum):
    """Which behaviour an operator follows (``xs3.md`` section 7).

    ``HOST_REFERENCE``: XMOS's x86 C reference of lib_nn a5f0c8b, artifacts included (int32 wrap
    in the rounding adds, per-operator accumulator saturation granularity, the padded-row order of
    deep/shallowin, wrap-around in depthwise and the legacy fc). Every conformance vector pins it.

    ``DEVICE``: what the XS3 assembly kernels imply, **not verified on silicon**: VLMACCR
    saturation once per 32-byte chunk for deep, shallowin, 1x1 and both fully_connected; VLMACC
    saturation after every product for depthwise; no wrap in the VLSAT rounding add; per-chunk
    saturation in the legacy fc. The two agree unless a running sum reaches +-(2^31 - 1) or a
    rounding add crosses 2^31.
    """

    HOST_REFERENCE = "host_reference"
    DEVICE = "device"

    @classmethod
    def parse(cls, value: Any, *, where: str = "model") -> Model:
        """A :class:`Model` from itself or its string value; anything else is an error that
        says what each model means."""
        return choose(cls, value, where, _MODEL_MEANINGS)


_MODEL_MEANINGS = {
    "host_reference": "XMOS's x86 C reference, which every conformance vector pins",
    "device": "what the XS3 assembly kernels imply, not verified on silicon",
}


def check_int(value: Any, where: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int in ``[low, high]``; bools, floats and strings are errors."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{where} must be an integer, got {value!r}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        lo = "-inf" if low is None else low
        hi = "+inf" if high is None else high
        raise InvalidInputError(f"{where} = {v} is outside [{lo}, {hi}]")
    return v


def check_bool(value: Any, where: str) -> bool:
    """``value`` as a bool; 0/1 and strings are errors (JSON has a real boolean)."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{where} must be true or false, got {value!r}")
    return value


def check_keys(
    obj: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping:
    """``obj`` as a mapping holding every ``required`` key and no key outside both lists."""
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where} must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"the known keys are {', '.join(required + optional)}"
        )
    missing = [k for k in required if k not in obj]
    if missing:
        raise InvalidInputError(f"{where}: missing key(s) {', '.join(map(repr, missing))}")
    return obj


@dataclass(frozen=True)
class Window:
    """The convolution window (lib_nn ``nn_window_params_t`` without dilation).

    Output pixel ``(oy, ox)`` reads input rows ``start_row + oy*stride_v + r``, ``r < height``,
    and columns ``start_col + ox*stride_h + c``, ``c < width``. Starts may be negative
    (padding) or positive (skipped input).
    """

    height: int
    width: int
    start_row: int = 0
    start_col: int = 0
    stride_v: int = 1
    stride_h: int = 1

    def __post_init__(self):
        for name in ("height", "width", "stride_v", "stride_h"):
            object.__setattr__(self, name, check_int(getattr(self, name), f"window.{name}", 1))
        for name in ("start_row", "start_col"):
            object.__setattr__(self, name, check_int(getattr(self, name), f"window.{name}"))

    @classmethod
    def from_attrs(cls, obj: Any) -> Window:
        """From the ``window`` attribute object; every key is required."""
        keys = ("height", "width", "start_row", "start_col", "stride_v", "stride_h")
        obj = check_keys(obj, "window", keys)
        return cls(**{k: obj[k] for k in keys})


@dataclass(frozen=True)
class YParams:
    """The output image shape (lib_nn ``y_params``): free, not derived from the window."""

    height: int
    width: int
    channels: int

    def __post_init__(self):
        for name in ("height", "width", "channels"):
            object.__setattr__(self, name, check_int(getattr(self, name), f"y_params.{name}", 1))

    @classmethod
    def from_attrs(cls, obj: Any) -> YParams:
        """From the ``y_params`` attribute object; every key is required."""
        obj = check_keys(obj, "y_params", ("height", "width", "channels"))
        return cls(obj["height"], obj["width"], obj["channels"])


@dataclass(frozen=True)
class OutputOptions:
    """The variant switches every BSO operator has.

    ``symmetric_saturation``: int8 output range [-127, 127] (lib_nn built with
    ``CONFIG_SYMMETRIC_SATURATION_<op>`` = 1) instead of [-128, 127]. ``fully_connected_16``
    and the legacy fc have no such option (their outputs are always symmetric).
    """

    symmetric_saturation: bool = False
    model: Model = Model.HOST_REFERENCE

    def __post_init__(self):
        check_bool(self.symmetric_saturation, "symmetric_saturation")
        object.__setattr__(self, "model", Model.parse(self.model))

    @property
    def output_low(self) -> int:
        """The lowest int8 output value."""
        return -127 if self.symmetric_saturation else -128


DEFAULT_OPTIONS = OutputOptions()


@dataclass(frozen=True)
class ConvParams:
    """Hyper-parameters of ``conv2d_deep``, ``conv2d_shallowin`` and ``conv2d_depthwise``.

    ``zero_point`` stands in for every channel of every input position outside the image.
    """

    zero_point: int
    window: Window
    y_params: YParams
    options: OutputOptions = DEFAULT_OPTIONS

    def __post_init__(self):
        check_int(self.zero_point, "zero_point", -128, 127)
        object.__setattr__(self, "zero_point", int(self.zero_point))
        for name, cls in (("window", Window), ("y_params", YParams), ("options", OutputOptions)):
            if not isinstance(getattr(self, name), cls):
                raise InvalidInputError(
                    f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}"
                )
