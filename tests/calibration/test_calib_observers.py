"""Observers: exact min/max, histogram percentiles, MSE-optimal ranges; streaming; errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantemu.calibration import MinMaxObserver, MSEObserver, PercentileObserver, make_observer
from quantemu.calibration.histogram import StreamingHistogram
from quantemu.errors import InvalidInputError

RNG = np.random.default_rng(0)

finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(1, 6)),
        elements=finite,
    ),
    st.integers(1, 3),
)
def test_minmax_is_exact_over_any_batching(x, pieces):
    per_tensor, per_channel = MinMaxObserver(), MinMaxObserver(axis=1)
    for part in np.array_split(x, pieces):
        if part.size:
            per_tensor.update(part)
            per_channel.update(part)
    assert per_tensor.range() == (float(x.min()), float(x.max()))
    low, high = per_channel.range()
    assert np.array_equal(low, x.min(axis=(0, 2))) and np.array_equal(high, x.max(axis=(0, 2)))


def test_histogram_counts_do_not_depend_on_batching():
    # Batches of growing magnitude force several range doublings; merges are exact.
    x = np.concatenate([RNG.normal(size=500) * 10.0**k for k in range(-2, 3)])
    whole, split = StreamingHistogram(1, 64), StreamingHistogram(1, 64)
    whole.update(x[None])
    for part in np.array_split(x, 5):
        split.update(part[None])
    assert np.array_equal(whole.positive.counts, split.positive.counts)
    assert np.array_equal(whole.negative.counts, split.negative.counts)
    assert whole.positive.counts.sum() + whole.negative.counts.sum() == x.size
    assert whole.positive.range[0] == 2.0 ** np.ceil(np.log2(x.max()))


@pytest.mark.parametrize("p", [99.0, 99.9, 99.99])
def test_percentile_matches_numpy_within_a_bin(p):
    x = RNG.normal(size=(50, 4, 32, 32)).astype(np.float32)  # 200k values: dense tails
    obs = PercentileObserver(percentile=p)
    for part in np.array_split(x, 4):
        obs.update(part)
    low, high = obs.range()
    bin_width = 2 ** np.ceil(np.log2(np.abs(x).max())) / 2048
    tolerance = 2 * bin_width + (0.01 if p == 99.99 else 0.0)  # 20 samples past 99.99 %
    assert abs(high - np.percentile(x, p)) <= tolerance
    assert abs(low - np.percentile(x, 100 - p)) <= tolerance


def test_percentile_per_channel_and_one_sided_data():
    x = np.maximum(RNG.normal(size=(16, 4, 8, 8)), 0) * np.array([1, 2, 4, 8]).reshape(1, 4, 1, 1)
    obs = PercentileObserver(axis=1, percentile=99.0)
    obs.update(x)
    low, high = obs.range()
    # Half the values are exactly 0: the lower percentile is exactly 0 (the zero point mass).
    assert low.shape == (4,) and np.array_equal(low, np.zeros(4))
    expected = np.percentile(np.moveaxis(x, 1, 0).reshape(4, -1), 99.0, axis=1)
    np.testing.assert_allclose(high, expected, rtol=0.03)


def test_percentile_100_is_minmax():
    x = RNG.normal(size=1000)
    obs = PercentileObserver(percentile=100.0)
    obs.update(x)
    assert obs.range() == (x.min(), x.max())


def test_mse_clips_outliers_and_keeps_dense_ranges():
    dense = RNG.uniform(-1, 3, size=100_000)
    obs = MSEObserver()
    obs.update(dense)
    low, high = obs.range()
    assert -1.0 <= low < -0.95 and 2.85 < high <= 3.0  # nothing worth clipping


def _quantization_error(x, low, high, bits):
    step = (high - low) / (2**bits - 1)
    q = np.clip(np.round((x - low) / step), 0, 2**bits - 1) * step + low
    return float(((x - q) ** 2).sum())


@pytest.mark.parametrize("bits", [4, 8])
def test_mse_range_is_near_the_brute_force_optimum(bits):
    x = RNG.laplace(size=100_000)
    obs = MSEObserver(bits=bits)
    obs.update(x)
    low, high = obs.range()
    grid = [_quantization_error(x, t * x.min(), t * x.max(), bits) for t in np.arange(1, 129) / 128]
    assert _quantization_error(x, low, high, bits) <= 1.05 * min(grid)
    if bits == 4:
        assert high < 0.6 * x.max()  # with 16 levels, clipping the tails pays off


def test_mse_symmetric_and_bits():
    x = RNG.laplace(size=50_000) + 0.5
    sym = MSEObserver(symmetric=True)
    sym.update(x)
    low, high = sym.range()
    assert low == -high
    ranges = []
    for bits in (4, 8, 12):
        obs = MSEObserver(bits=bits)
        obs.update(x)
        ranges.append(obs.range()[1])
    assert ranges[0] < ranges[1] <= ranges[2]  # more levels afford a wider range


def test_mse_per_channel():
    x = RNG.normal(size=(32, 3, 10)) * np.array([1.0, 5.0, 25.0]).reshape(1, 3, 1)
    obs = MSEObserver(axis=1)
    obs.update(x)
    low, high = obs.range()
    assert low.shape == high.shape == (3,)
    assert high[0] < high[1] < high[2] and np.all(low < 0)


def test_errors():
    with pytest.raises(InvalidInputError, match="NaN or infinity"):
        MinMaxObserver(tensor="t").update(np.array([1.0, np.nan]))
    obs = MinMaxObserver(axis=1, tensor="conv")
    obs.update(np.zeros((2, 3, 4)))
    with pytest.raises(
        InvalidInputError, match="tensor 'conv': 5 channels on axis 1, earlier batches had 3"
    ):
        obs.update(np.zeros((2, 5, 4)))
    with pytest.raises(InvalidInputError, match="channel axis 3 is out of range"):
        MinMaxObserver(axis=3).update(np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match="no data was observed"):
        MinMaxObserver().range()
    with pytest.raises(InvalidInputError, match="empty batch"):
        MinMaxObserver().update(np.zeros((0, 3)))
    with pytest.raises(InvalidInputError, match=r"percentile must be in \(50, 100\]"):
        PercentileObserver(percentile=20)
    with pytest.raises(InvalidInputError, match=r"bits must be in 2\.\.16"):
        MSEObserver(bits=1)
    with pytest.raises(InvalidInputError, match="unknown observer 'kl'; observers: minmax"):
        make_observer("kl")
