"""A streaming, per-channel histogram whose bins merge exactly as the range grows.

Each channel keeps two histograms anchored at zero, one for the positive values and one for the
magnitudes of the negative ones, each with ``bins`` equal bins over ``[0, R)``, ``R`` a power of
two, and the exact count of zeros (a point mass: ReLU outputs are often half zeros, and a
percentile that falls among them must be exactly 0). When a batch exceeds ``R`` the range
doubles and adjacent bin pairs merge, which is exact: no count ever moves to a bin it does not
belong to, so the result does not depend on how the data was split into batches. Anchoring at
zero keeps the bins aligned with the zero point every quantizer must represent, and all channels
are updated at once (``np.bincount`` over ``channel * bins + bin``).
"""

from __future__ import annotations

import numpy as np

#: Bins per side: fine enough that the 256 levels of 8-bit quantization span many bins.
DEFAULT_BINS = 2048
#: Bins per side and channel for per-channel observers.
PER_CHANNEL_BINS = 512


def _pow2_ceil(values: np.ndarray) -> np.ndarray:
    """The smallest power of two >= each value (0 for 0)."""
    out = np.zeros_like(values, dtype=np.float64)
    positive = values > 0
    out[positive] = np.exp2(np.ceil(np.log2(values[positive])))
    return out


class _Side:
    """One side (positive values, or negated negative values) of every channel."""

    def __init__(self, channels: int, bins: int) -> None:
        self.bins = bins
        self.counts = np.zeros((channels, bins), dtype=np.int64)
        self.range = np.zeros(channels, dtype=np.float64)

    def grow(self, needed: np.ndarray) -> None:
        """Double ranges (merging bin pairs) until every channel's range exceeds ``needed``."""
        fresh = (self.range == 0) & (needed > 0)
        self.range[fresh] = _pow2_ceil(needed[fresh])
        # A value exactly at R lands in the last bin, so only values above R need a doubling.
        while True:
            grow = needed > self.range
            if not grow.any():
                return
            half = self.bins // 2
            merged = self.counts[grow, 0::2] + self.counts[grow, 1::2]
            self.counts[grow, :half] = merged
            self.counts[grow, half:] = 0
            self.range[grow] *= 2

    def add(self, values: np.ndarray, mask: np.ndarray) -> None:
        """Count the ``values`` (channels x n, >= 0) where ``mask`` is true into the bins."""
        channels = values.shape[0]
        scale = self.bins / np.where(self.range > 0, self.range, 1.0)
        index = np.minimum((values * scale[:, None]).astype(np.int64), self.bins - 1)
        index += (np.arange(channels, dtype=np.int64) * self.bins)[:, None]
        self.counts += np.bincount(index[mask], minlength=channels * self.bins).reshape(
            channels, self.bins
        )


class StreamingHistogram:
    """Histograms of ``channels`` channels, fed batch by batch with :meth:`update`."""

    def __init__(self, channels: int, bins: int = DEFAULT_BINS) -> None:
        if bins < 2 or bins % 2:
            raise ValueError(f"bins must be an even number >= 2, got {bins}")
        self.channels, self.bins = channels, bins
        self.positive = _Side(channels, bins)
        self.negative = _Side(channels, bins)
        self.zeros = np.zeros(channels, dtype=np.int64)

    def update(self, values: np.ndarray) -> None:
        """Add ``values`` of shape ``(channels, n)``."""
        values = values.astype(np.float64, copy=False)
        pos = np.maximum(values, 0.0)
        neg = np.maximum(-values, 0.0)
        self.positive.grow(pos.max(axis=1))
        self.negative.grow(neg.max(axis=1))
        self.positive.add(pos, values > 0)
        self.negative.add(neg, values < 0)
        self.zeros += (values == 0).sum(axis=1)

    def combined(self, factor: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, edges)`` per channel over the real line: ``(C, 2b+1)``, ``(C, 2b+2)``.

        ``b = bins / factor``: ``factor`` adjacent bins of each side are merged. The negative
        side comes first, reversed, so edges increase left to right; the zeros are a bin of
        width zero at 0.
        """
        b = self.bins // factor
        merge = (self.channels, b, factor)
        negative = self.negative.counts.reshape(merge).sum(axis=2)
        positive = self.positive.counts.reshape(merge).sum(axis=2)
        counts = np.concatenate([negative[:, ::-1], self.zeros[:, None], positive], axis=1)
        steps = np.arange(b + 1, dtype=np.float64) / b
        neg_edges = -self.negative.range[:, None] * steps[::-1]
        pos_edges = self.positive.range[:, None] * steps
        return counts, np.concatenate([neg_edges, pos_edges], axis=1)
