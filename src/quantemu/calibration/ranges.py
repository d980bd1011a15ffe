"""Calibration results: per-tensor ``(min, max)`` ranges that serialize to and from JSON.

The JSON document (``quantemu calibrate --out ranges.json``)::

    {"format": "quantemu-ranges", "version": 1, "model": "...", "observer": "minmax",
     "per_channel": false, "options": {...}, "batches": 4, "samples": 128,
     "tensors": {"conv1_out": {"min": -1.5, "max": 3.25, "axis": null},
                 "conv2_out": {"min": [...], "max": [...], "axis": 1}}}

Floats are written with Python's shortest round-tripping repr, so :meth:`CalibrationRanges.load`
gives back exactly the values that were saved.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from quantemu.documents import check_header, header
from quantemu.errors import InvalidInputError

FORMAT = "quantemu-ranges"
VERSION = 1
#: The observer of :func:`uncalibrated` ranges (a pipeline that uses none, NVDLA's FP16).
NO_CALIBRATION = "none"


@dataclass(frozen=True)
class TensorRange:
    """The observed range of one tensor: floats, or per-channel arrays along ``axis``.

    Unpacks as ``low, high = tensor_range``.
    """

    min: float | np.ndarray
    max: float | np.ndarray
    axis: int | None = None

    def __post_init__(self) -> None:
        if self.axis is not None:
            for name in ("min", "max"):
                value = np.array(getattr(self, name), dtype=np.float64)
                value.setflags(write=False)
                object.__setattr__(self, name, value)
        else:
            object.__setattr__(self, "min", float(self.min))
            object.__setattr__(self, "max", float(self.max))

    def __iter__(self) -> Iterator[float | np.ndarray]:
        return iter((self.min, self.max))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorRange):
            return NotImplemented
        return (
            self.axis == other.axis
            and np.array_equal(self.min, other.min)
            and np.array_equal(self.max, other.max)
        )

    __hash__ = None  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        """``{"min": ..., "max": ..., "axis": ...}`` with lists for per-channel ranges."""
        if self.axis is None:
            return {"min": self.min, "max": self.max, "axis": None}
        return {"min": self.min.tolist(), "max": self.max.tolist(), "axis": self.axis}


@dataclass(frozen=True)
class CalibrationRanges(Mapping[str, TensorRange]):
    """Tensor name -> :class:`TensorRange`, with how the ranges were obtained."""

    tensors: Mapping[str, TensorRange]
    observer: str
    per_channel: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    batches: int = 0
    samples: int = 0
    model: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __getitem__(self, name: str) -> TensorRange:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"no range for tensor {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (a dict) described in the module docstring."""
        return {
            **header(FORMAT, VERSION),
            "model": self.model,
            "observer": self.observer,
            "per_channel": self.per_channel,
            "options": dict(self.options),
            "batches": self.batches,
            "samples": self.samples,
            "tensors": {name: r.to_json() for name, r in self.tensors.items()},
        }

    def dumps(self) -> str:
        """The JSON document as text."""
        return json.dumps(self.to_json(), indent=1, allow_nan=False)

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON document to ``path``."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.dumps() + "\n")

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> CalibrationRanges:
        """Rebuild from :meth:`to_json`'s document; malformed documents raise InvalidInputError."""
        check_header(document, FORMAT, VERSION, "ranges")
        try:
            tensors = {
                name: _range_entry(name, entry) for name, entry in document["tensors"].items()
            }
            return cls(
                tensors=tensors,
                observer=str(document["observer"]),
                per_channel=bool(document.get("per_channel", False)),
                options=_options(document.get("options", {})),
                batches=_count(document, "batches"),
                samples=_count(document, "samples"),
                model=str(document.get("model", "")),
            )
        except InvalidInputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise InvalidInputError(
                f"malformed ranges document: {exc!r}; write it with `quantemu calibrate --out`"
            ) from exc

    @classmethod
    def load(cls, path: str | os.PathLike) -> CalibrationRanges:
        """Read a JSON document written by :meth:`save`."""
        try:
            with open(path, encoding="utf-8") as source:
                document = json.load(source)
        except OSError as exc:
            raise InvalidInputError(f"cannot read ranges file {path}: {exc}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"{path} is not a UTF-8 JSON ranges file: {exc}") from exc
        return cls.from_json(document)


def _options(value: Any) -> dict[str, Any]:
    # The document must save again as it loaded: plain JSON, finite numbers.
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"ranges document: options {value!r} must hold plain JSON values ({exc})"
        ) from exc
    return dict(value)


def _count(document: Mapping[str, Any], key: str) -> int:
    value = document.get(key, 0)
    if type(value) is not int or value < 0:
        raise InvalidInputError(f"ranges document: {key!r} must be a count >= 0, got {value!r}")
    return value


def _range_entry(name: Any, entry: Any) -> TensorRange:
    """One tensor's range, checked: finite, min <= max, and per-channel lists of one length."""
    where = f"ranges document: tensor {name!r}"
    if not isinstance(name, str) or not isinstance(entry, Mapping):
        raise InvalidInputError(f"{where}: an entry must be an object with min, max and axis")
    axis = entry.get("axis")
    if axis is not None and (type(axis) is not int or axis < 0):
        raise InvalidInputError(f"{where}: axis must be null or an integer >= 0, got {axis!r}")
    bounds = []
    for key in ("min", "max"):
        value = entry.get(key)
        shape_ok = isinstance(value, list) if axis is not None else _is_number(value)
        if not shape_ok or (axis is not None and not all(map(_is_number, value))):
            kind = "a non-empty list of numbers" if axis is not None else "a number"
            raise InvalidInputError(f"{where}: {key} must be {kind} (axis {axis}), got {value!r}")
        bounds.append(np.asarray(value, dtype=np.float64))
    low, high = bounds
    if low.shape != high.shape or low.size == 0:
        raise InvalidInputError(
            f"{where}: min has {low.size} values and max {high.size}; they must match (> 0)"
        )
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low <= high)):
        raise InvalidInputError(
            f"{where}: min {entry['min']!r} and max {entry['max']!r} must be finite with min <= "
            "max; recalibrate with finite data"
        )
    return TensorRange(entry["min"], entry["max"], axis)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def uncalibrated() -> CalibrationRanges:
    """No ranges at all: what a backend whose options need no calibration is lowered with."""
    return CalibrationRanges({}, observer=NO_CALIBRATION)
