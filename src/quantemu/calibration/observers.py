"""Range observers: min/max, percentile and MSE-optimal, per tensor or per channel, streaming.

An observer is fed batches of one tensor with :meth:`Observer.update` and keeps a running state
(running min/max; a :class:`~quantemu.calibration.histogram.StreamingHistogram` for percentile and
MSE), so a calibration set of any size streams through in constant memory. :meth:`Observer.range`
returns ``(min, max)``: floats for a per-tensor observer, 1-D float64 arrays (one entry per
channel along ``axis``) for a per-channel one.

- ``minmax``: the exact running minimum and maximum.
- ``percentile``: the ``100 - p`` and ``p`` percentiles (default p = 99.99) of the values,
  interpolated linearly inside a histogram bin and clamped to the exact min/max.
- ``mse``: the clipping range ``[t * min, t * max]`` (or ``[-t m, t m]`` when ``symmetric``,
  ``m = max |x|``), over a grid of ``t`` in ``(0, 1]``, that minimizes the expected squared error
  of uniform ``bits``-bit quantization: ``step^2 / 12`` per value inside the range plus the
  squared distance to the range for each value outside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantemu.calibration.histogram import DEFAULT_BINS, PER_CHANNEL_BINS, StreamingHistogram
from quantemu.errors import InvalidInputError

OBSERVERS = ("minmax", "percentile", "mse")

Range = tuple[float | np.ndarray, float | np.ndarray]


class Observer:
    """Base class: channel handling, running min/max and the update/range protocol."""

    name = "?"

    def __init__(self, *, axis: int | None = None, tensor: str = "") -> None:
        self.axis = axis
        self.tensor = tensor
        self.channels: int | None = None
        self.samples = 0
        self.min: np.ndarray | None = None
        self.max: np.ndarray | None = None

    def _where(self) -> str:
        return f"tensor {self.tensor!r}" if self.tensor else "observer"

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """``x`` as ``(channels, n)`` (one row for a per-tensor observer)."""
        x = np.asarray(x)
        if x.size == 0:
            raise InvalidInputError(f"{self._where()}: an empty batch cannot be observed")
        if not np.isfinite(x).all():
            raise InvalidInputError(
                f"{self._where()}: the float model computes NaN or infinity here from finite "
                "inputs and weights (an overflow, e.g. in Exp, or a division by zero); check the "
                "scale of the calibration data and its normalization"
            )
        if self.axis is None:
            return x.reshape(1, -1)
        if not -x.ndim <= self.axis < x.ndim:
            raise InvalidInputError(
                f"{self._where()}: channel axis {self.axis} is out of range for shape {x.shape}"
            )
        rows = np.moveaxis(x, self.axis, 0).reshape(x.shape[self.axis], -1)
        if self.channels is not None and rows.shape[0] != self.channels:
            raise InvalidInputError(
                f"{self._where()}: {rows.shape[0]} channels on axis {self.axis}, earlier batches "
                f"had {self.channels}"
            )
        return rows

    def update(self, x: np.ndarray) -> None:
        """Observe one batch of the tensor."""
        rows = self._rows(x).astype(np.float64, copy=False)
        self.channels = rows.shape[0]
        low, high = rows.min(axis=1), rows.max(axis=1)
        self.min = low if self.min is None else np.minimum(self.min, low)
        self.max = high if self.max is None else np.maximum(self.max, high)
        self.samples += 1
        self._observe(rows)

    def _observe(self, rows: np.ndarray) -> None:
        """Subclass hook: update the state beyond min/max."""

    def range(self) -> Range:
        """``(min, max)``: floats per tensor, arrays per channel."""
        if self.min is None or self.max is None:
            raise InvalidInputError(f"{self._where()}: no data was observed")
        low, high = self._range()
        if self.axis is None:
            return float(low[0]), float(high[0])
        return low, high

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        return self.min, self.max


class MinMaxObserver(Observer):
    """The exact running minimum and maximum."""

    name = "minmax"


class _HistogramObserver(Observer):
    def __init__(self, *, bins: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Per-channel histograms use fewer bins: hundreds of channels x thousands of bins per
        # tensor would cost more memory than the activations themselves.
        self.bins = bins or (DEFAULT_BINS if self.axis is None else PER_CHANNEL_BINS)
        self.histogram: StreamingHistogram | None = None

    def _observe(self, rows: np.ndarray) -> None:
        if self.histogram is None:
            self.histogram = StreamingHistogram(rows.shape[0], self.bins)
        self.histogram.update(rows)


class PercentileObserver(_HistogramObserver):
    """The ``100 - percentile`` and ``percentile`` percentiles of the observed values."""

    name = "percentile"

    def __init__(self, *, percentile: float = 99.99, **kwargs: Any) -> None:
        if not 50.0 < percentile <= 100.0:
            raise InvalidInputError(f"percentile must be in (50, 100], got {percentile}")
        super().__init__(**kwargs)
        self.percentile = percentile

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        if self.percentile == 100.0:
            return self.min, self.max
        counts, edges = self.histogram.combined()
        tail = (100.0 - self.percentile) / 100.0
        low = _quantile(counts, edges, tail)
        high = _quantile(counts, edges, 1.0 - tail)
        return np.clip(low, self.min, self.max), np.clip(high, self.min, self.max)


def _quantile(counts: np.ndarray, edges: np.ndarray, q: float) -> np.ndarray:
    """Per-row quantile ``q`` of histograms, linear inside the bin where the CDF crosses q."""
    cdf = np.cumsum(counts, axis=1, dtype=np.float64)
    target = q * cdf[:, -1:]
    index = np.argmax(cdf >= target, axis=1)
    rows = np.arange(counts.shape[0])
    before = np.where(index > 0, cdf[rows, np.maximum(index - 1, 0)], 0.0)
    inside = counts[rows, index].astype(np.float64)
    fraction = np.where(inside > 0, (target[:, 0] - before) / np.where(inside > 0, inside, 1), 0)
    left, right = edges[rows, index], edges[rows, index + 1]
    return left + np.clip(fraction, 0.0, 1.0) * (right - left)


class MSEObserver(_HistogramObserver):
    """The clipping range minimizing the expected ``bits``-bit uniform quantization error."""

    name = "mse"

    def __init__(
        self, *, bits: int = 8, symmetric: bool = False, grid: int = 128, **kwargs: Any
    ) -> None:
        if not 2 <= bits <= 16:
            raise InvalidInputError(f"bits must be in 2..16, got {bits}")
        super().__init__(**kwargs)
        self.bits, self.symmetric, self.grid = bits, symmetric, grid

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        # The search does not need the full resolution: merge 4 bins into one.
        counts, edges = self.histogram.combined(factor=4)
        centers = (edges[:, :-1] + edges[:, 1:]) / 2
        t = np.arange(1, self.grid + 1, dtype=np.float64) / self.grid
        if self.symmetric:
            magnitude = np.maximum(-self.min, self.max)
            low, high = -magnitude[:, None] * t, magnitude[:, None] * t
        else:
            low = np.minimum(self.min, 0.0)[:, None] * t
            high = np.maximum(self.max, 0.0)[:, None] * t
        best = np.empty(counts.shape[0], dtype=np.int64)
        for start in range(0, counts.shape[0], 16):  # bound memory: 16 channels at a time
            part = slice(start, start + 16)
            errors = _expected_error(counts[part], centers[part], low[part], high[part], self.bits)
            best[part] = np.argmin(errors, axis=1)
        rows = np.arange(counts.shape[0])
        return low[rows, best], high[rows, best]


def _expected_error(counts, centers, low, high, bits: int) -> np.ndarray:
    """Expected squared error per (channel, candidate): counts (C, B), low/high (C, K)."""
    step = (high - low) / (2**bits - 1)
    inside = step**2 / 12.0
    x = centers[:, None, :]
    below = np.maximum(low[:, :, None] - x, 0.0)
    above = np.maximum(x - high[:, :, None], 0.0)
    clipped = below**2 + above**2
    per_value = np.where(clipped > 0, clipped, inside[:, :, None])
    return (per_value * counts[:, None, :]).sum(axis=2)


def make_observer(kind: str, *, axis: int | None = None, tensor: str = "", **options: Any):
    """An observer by name (``minmax``, ``percentile``, ``mse``) with its options.

    Options an observer does not use are ignored (``percentile`` for ``mse``, ...), so one set
    of calibration options can serve every observer.
    """
    if kind == "minmax":
        return MinMaxObserver(axis=axis, tensor=tensor)
    if kind == "percentile":
        return PercentileObserver(
            axis=axis, tensor=tensor, percentile=options.get("percentile", 99.99)
        )
    if kind == "mse":
        return MSEObserver(
            axis=axis,
            tensor=tensor,
            bits=options.get("bits", 8),
            symmetric=options.get("symmetric", False),
        )
    raise InvalidInputError(f"unknown observer {kind!r}; observers: {', '.join(OBSERVERS)}")
