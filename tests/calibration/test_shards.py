"""Sample sets read lazily by range: shards (.npy memory-mapped, .npz members), globs, lists."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from quantemu.calibration.shards import ArraySamples, ShardedDataset, open_samples
from quantemu.errors import InvalidInputError


@pytest.fixture
def shards(tmp_path):
    x = np.arange(11 * 2, dtype=np.float32).reshape(11, 2)
    np.save(tmp_path / "a.npy", x[:4])
    np.savez(tmp_path / "b.npz", x=x[4:5], y=np.zeros(1))
    np.save(tmp_path / "c.npy", x[5:])
    return x, [tmp_path / "a.npy", tmp_path / "b.npz", tmp_path / "c.npy"]


def test_every_range_reads_what_the_concatenation_holds(shards):
    x, paths = shards
    data = open_samples(paths)
    assert len(data) == 11 and data.sample_shape == (2,)
    for start in range(12):
        for stop in range(start, 13):
            assert np.array_equal(data.read(start, stop), x[start:stop]), (start, stop)


def test_a_glob_and_pickling_carry_names_only(shards, tmp_path):
    x, _ = shards
    data = open_samples(str(tmp_path / "*.np?"))
    assert isinstance(data, ShardedDataset) and len(pickle.dumps(data)) < 2000
    assert np.array_equal(pickle.loads(pickle.dumps(data)).read(3, 7), x[3:7])
    assert isinstance(open_samples(x), ArraySamples)


def test_bad_shards_are_named(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(InvalidInputError, match="different shapes"):
        open_samples([tmp_path / "a.npy", tmp_path / "b.npy"])
    with pytest.raises(InvalidInputError, match="matched none"):
        open_samples(str(tmp_path / "none-*.npy"))
    with pytest.raises(InvalidInputError, match="does not exist"):
        open_samples([tmp_path / "missing.npy"])
    np.savez(tmp_path / "two.npz", p=np.zeros((2, 3)), q=np.zeros((2, 3)))
    with pytest.raises(InvalidInputError, match="name the data array"):
        open_samples([tmp_path / "two.npz"])
    assert len(ShardedDataset([tmp_path / "two.npz"], key="q")) == 2
