"""Sample sets read lazily: ``.npy``/``.npz`` shards (a list or a glob), read by sample range.

An evaluation set can be larger than memory (50,000 ImageNet images) and can live where a
cluster's workers read it themselves. :class:`ShardedDataset` knows each shard's sample count
from the file headers alone; :meth:`ShardedDataset.read` loads the samples ``start:stop`` of the
whole set, opening only the shards that hold them (``.npy`` memory-mapped, so a range costs its
own bytes; an ``.npz`` member is loaded whole, and the last two are kept). It pickles as its file
list, so a task shipped to a worker carries names, not data.

:func:`open_samples` turns what a user gives (an array, a path, a glob such as
``"val/shard-*.npz"``, a list of paths, a folder of images) into something with ``len()`` and
``read(start, stop)`` (:class:`ArraySamples`, :class:`ShardedDataset`, or
:class:`~quantemu.calibration.datasets.ImageFolderDataset`).
"""

from __future__ import annotations

import bisect
import functools
import glob
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from quantemu.calibration.datasets import ImageFolderDataset, ImageOptions
from quantemu.errors import InvalidInputError

NPZ_DATA_KEYS = ("x", "data", "inputs", "images")


class ShardedDataset:
    """Samples stored across ``.npy``/``.npz`` files, in the order of ``paths`` (see module)."""

    def __init__(self, paths: Sequence[str | os.PathLike], key: str | None = None) -> None:
        self.paths = tuple(str(p) for p in paths)
        if not self.paths:
            raise InvalidInputError(
                "no shard files given (an empty list, or a glob that matched none)"
            )
        self.key = key
        shapes = [_shard_shape(p, key) for p in self.paths]
        tails = {s[1:] for s in shapes}
        if len(tails) > 1:
            raise InvalidInputError(
                f"shards hold samples of different shapes {sorted(tails)}; every shard must hold "
                "samples of one shape (batch first)"
            )
        self.sample_shape = shapes[0][1:]
        self.offsets = tuple(np.cumsum([0] + [s[0] for s in shapes]).tolist())

    def __len__(self) -> int:
        return self.offsets[-1]

    def __repr__(self) -> str:
        return f"ShardedDataset({len(self.paths)} files, {len(self)} samples)"

    def read(self, start: int, stop: int) -> np.ndarray:
        """Samples ``start:stop`` of the whole set, from the shards that hold them."""
        start, stop = max(0, start), min(stop, len(self))
        parts = []
        first = bisect.bisect_right(self.offsets, start) - 1
        for i in range(first, len(self.paths)):
            lo, hi = self.offsets[i], self.offsets[i + 1]
            if lo >= stop:
                break
            shard = _shard(self.paths[i], self.key)
            parts.append(np.asarray(shard[max(start, lo) - lo : min(stop, hi) - lo]))
        if not parts:
            return np.empty((0, *self.sample_shape), np.float32)
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)

    def batches(self, batch_size: int):
        """Consecutive ``read`` ranges (the calibration interface)."""
        for start in range(0, len(self), batch_size):
            yield self.read(start, start + batch_size)


class ArraySamples:
    """An in-memory array read by sample range (its dtype kept: codes stay codes)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __len__(self) -> int:
        return int(self.array.shape[0]) if self.array.ndim else 0

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]


def open_samples(source: Any, *, key: str | None = None, image_options: ImageOptions | None = None):
    """A readable sample set (``len`` and ``read(start, stop)``) from an array, a ``.npy`` or
    ``.npz`` path, a glob or a list of such paths (shards, read lazily), or an image folder."""
    if hasattr(source, "read") and hasattr(source, "__len__"):
        return source
    if isinstance(source, np.ndarray):
        return ArraySamples(source)
    if isinstance(source, list | tuple) and all(isinstance(p, str | os.PathLike) for p in source):
        return ShardedDataset([_existing(p) for p in source], key)
    if not isinstance(source, str | os.PathLike):
        raise InvalidInputError(
            "evaluation data must be an array, a .npy/.npz path, a glob or list of them, or a "
            f"folder of images, got {type(source).__name__}"
        )
    text = str(source)
    if any(c in text for c in "*?["):
        return ShardedDataset(sorted(glob.glob(text)), key)
    path = Path(_existing(text))
    if path.is_dir():
        return ImageFolderDataset(path, image_options)
    return ShardedDataset([path], key)


def _existing(path: str | os.PathLike) -> str:
    if not Path(path).exists():
        raise InvalidInputError(f"evaluation data {path} does not exist")
    if Path(path).suffix not in (".npy", ".npz") and not Path(path).is_dir():
        raise InvalidInputError(f"{path}: expected .npy or .npz shards, or a folder of images")
    return str(path)


def _shard_shape(path: str, key: str | None) -> tuple[int, ...]:
    """A shard's array shape from its header only (no sample is read)."""
    try:
        if path.endswith(".npy"):
            shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
        else:
            with zipfile.ZipFile(path) as archive:
                member = _npz_member(
                    path, key, [n.removesuffix(".npy") for n in archive.namelist()]
                )
                with archive.open(member + ".npy") as handle:
                    major, _minor = np.lib.format.read_magic(handle)
                    header = (
                        np.lib.format.read_array_header_1_0
                        if major == 1
                        else np.lib.format.read_array_header_2_0
                    )
                    shape = header(handle)[0]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(f"cannot read shard {path}: {exc}") from exc
    if len(shape) < 1:
        raise InvalidInputError(f"shard {path} holds a scalar; shards hold samples, batch first")
    return tuple(shape)


def _npz_member(path: str, key: str | None, names: list[str]) -> str:
    if key is not None:
        if key not in names:
            raise InvalidInputError(f"shard {path} has no array {key!r} (it has {names})")
        return key
    if len(names) == 1:
        return names[0]
    found = next((k for k in NPZ_DATA_KEYS if k in names), None)
    if found is None:
        raise InvalidInputError(
            f"shard {path} holds {names}; name the data array (key=... / --eval-key)"
        )
    return found


@functools.lru_cache(maxsize=2)
def _shard(path: str, key: str | None) -> np.ndarray:
    """A shard's samples: a read-only memory map of a ``.npy``, the loaded ``.npz`` member."""
    if path.endswith(".npy"):
        return np.load(path, mmap_mode="r", allow_pickle=False)
    with np.load(path, allow_pickle=False) as archive:
        return archive[_npz_member(path, key, list(archive.keys()))]
