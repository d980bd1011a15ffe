"""Per-layer clip selection for NNIE: max-abs and the MSE search over table clips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nnie import log_dequantize, log_quantize, quantize
from quantemu.backends.nnie.cliptable import default_clip_table
from quantemu.backends.nnie.quantize import LogObserver, select_clip_max_abs, select_clip_mse
from quantemu.errors import InvalidInputError

F32 = np.float32


def direct_mse(x: np.ndarray, k: int) -> float:
    """MSE of log-quantizing x with the table clip c_k, the slow obvious way."""
    _, y = log_quantize(x, default_clip_table().clip(k))
    return float(np.mean((y.astype(np.float64) - x.astype(np.float64)) ** 2))


def test_observer_mse_equals_direct_mse():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(5000) * 2).astype(F32)
    obs = LogObserver()
    obs.update(x)
    ks = np.arange(10, 50)
    want = np.array([direct_mse(x, int(k)) for k in ks])
    np.testing.assert_allclose(obs.mse(ks), want, rtol=1e-9)


def test_batches_merge_like_one_batch():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(3000) * 5).astype(F32)
    one, parts = LogObserver(), LogObserver()
    one.update(x)
    for chunk in np.array_split(x, 7):
        parts.update(chunk)
    assert parts.count == one.count == 3000 and parts.max_abs == one.max_abs
    np.testing.assert_array_equal(parts.count_per_key, one.count_per_key)
    ks = np.arange(20, 60)
    np.testing.assert_allclose(parts.mse(ks), one.mse(ks), rtol=1e-9)


def test_chunked_evaluation_matches(monkeypatch):
    x = np.random.default_rng(2).standard_normal(2000).astype(F32)
    obs = LogObserver()
    obs.update(x)
    ks = np.arange(0, 40)
    whole = obs.mse(ks)
    monkeypatch.setattr(quantize, "_CHUNK_ELEMENTS", 1)  # one candidate per chunk
    np.testing.assert_array_equal(obs.mse(ks), whole)


def test_max_abs_is_snapped_max():
    # max|x| = 3.7 -> k = round(16*log2 3.7) = 30, clip c_30 = 2^(30/16) = 3.668...
    choice = select_clip_max_abs(np.array([1.0, -3.7, 0.5], F32))
    assert (choice.method, choice.k, choice.z) == ("max_abs", 30, -97)
    assert choice.clip == default_clip_table().clip(30)
    assert choice.max_abs == float(F32(3.7))
    assert choice.snap.k == 30 and choice.candidates == (30,)
    assert choice.mse == pytest.approx(direct_mse(np.array([1.0, -3.7, 0.5], F32), 30))


def test_mse_search_finds_the_generating_table_clip():
    # Data = every level of c_k0: k0 quantizes it with zero error, k0-1 cannot reach the top
    # level and k0+1 cannot reach the bottom one (the grid 2^(n/16) is the same for every k; only
    # its 128-level window moves), so k0 is the unique zero of the MSE.
    k0 = 40
    levels = log_dequantize(np.arange(256, dtype=np.uint8), default_clip_table().clip(k0))
    choice = select_clip_mse(levels)
    assert choice.k == k0 and choice.mse == 0.0
    assert choice.candidates == tuple(range(k0 - 32, k0 + 4 + 1))
    assert sorted(choice.mses)[1] > 0.0


def test_mse_search_beats_a_misleading_max_abs():
    # Same levels, weighted towards +-L(0) (20000 copies each), plus one value just above the
    # snapping tie 2^((k0+1/2)/16): max-abs snaps to k0+1, which loses L(0) (error
    # (2^(1/16)-1)*L(0) = 0.044 L(0) on 40000 elements: 78 L(0)^2 in all) to spare the outlier
    # (clamped at k0: error (2^(0.55/16)-1)*c_k0 = 0.024*245 L(0) = 5.9 L(0): 35 L(0)^2).
    # The search returns k0.
    k0 = 40
    levels = log_dequantize(np.arange(256, dtype=np.uint8), default_clip_table().clip(k0))
    outlier = F32(2.0 ** ((k0 + 0.55) / 16))
    x = np.concatenate([levels, np.tile(levels[[0x00, 0x81]], 20000), [outlier]]).astype(F32)
    assert select_clip_max_abs(x).k == k0 + 1
    choice = select_clip_mse(x)
    assert choice.k == k0
    assert choice.mse == pytest.approx(direct_mse(x, k0), rel=1e-9)


def test_window_is_cut_to_the_table():
    x = np.array([2.0 ** (2040 / 16)], F32)
    choice = select_clip_mse(x, below=2, above=50)
    assert choice.candidates == (2038, 2039, 2040, 2041, 2042, 2043, 2044, 2045, 2046, 2047)


data_families = st.sampled_from(["normal", "uniform", "relu", "laplace", "lognormal"])


@settings(max_examples=25)
@given(data_families, st.floats(1e-3, 1e3), st.integers(1, 400), st.integers(0, 2**32 - 1))
def test_mse_search_never_worse_than_max_abs(family, scale, n, seed):
    rng = np.random.default_rng(seed)
    draw = {
        "normal": lambda: rng.standard_normal(n),
        "uniform": lambda: rng.uniform(-1, 1, n),
        "relu": lambda: np.maximum(rng.standard_normal(n), 0) + (np.arange(n) == 0),
        "laplace": lambda: rng.laplace(size=n),
        "lognormal": lambda: rng.lognormal(0, 3, n) * rng.choice([-1, 1], n),
    }[family]
    x = (draw() * scale).astype(F32)
    if not np.any(x):
        x[0] = 1.0
    by_max = select_clip_max_abs(x)
    by_mse = select_clip_mse(x)
    assert by_mse.mse <= by_max.mse
    assert by_max.k in by_mse.candidates
    assert by_mse.mse == min(by_mse.mses)
    assert by_mse.mse == pytest.approx(direct_mse(x, by_mse.k), rel=1e-9)


def test_errors():
    with pytest.raises(InvalidInputError, match="no calibration data"):
        select_clip_mse(LogObserver())
    with pytest.raises(InvalidInputError, match="no calibration data"):
        LogObserver().mse([0])
    with pytest.raises(InvalidInputError, match="all 3 calibration values are zero"):
        select_clip_max_abs(np.zeros(3, F32))
    with pytest.raises(InvalidInputError, match="contains 2 infinite value"):
        LogObserver().update(np.array([np.inf, 1.0, -np.inf], F32))
    with pytest.raises(InvalidInputError, match="calibration batch contains 1 NaN"):
        LogObserver().update(np.array([np.nan, 1.0], F32))
    with pytest.raises(InvalidInputError, match="calibration batch has dtype float64"):
        LogObserver().update(np.ones(2))
    with pytest.raises(InvalidInputError, match="below must be a non-negative integer"):
        select_clip_mse(np.ones(2, F32), below=-1)
    with pytest.raises(InvalidInputError, match="outside the clip table"):
        select_clip_max_abs(np.array([1e-40], F32))
