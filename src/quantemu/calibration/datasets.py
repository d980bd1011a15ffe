"""Calibration datasets: NumPy arrays, .npy/.npz files, and directories of images.

:func:`load_dataset` turns any of these into a :class:`Dataset` that yields float32 batches:

- a NumPy array ``(N, ...)``: the samples along axis 0; a mapping ``{input name: array}`` feeds a
  multi-input model (all arrays have the same N);
- a ``.npy`` file: the array it holds;
- a ``.npz`` file: the array named ``key``; without ``key``, the only array in the file, or else
  the first of :data:`NPZ_KEYS` present (an error lists the keys otherwise);
- a directory: every image file in it (:data:`IMAGE_SUFFIXES`, sorted by name, not recursive),
  read with Pillow (``pip install pillow``) and prepared by :class:`ImageOptions`.

Arrays must already be normalized the way the model expects; integer arrays are rejected rather
than guessed at (divide by 255, or whatever the model was trained with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError

NPZ_KEYS = ("x", "inputs", "input", "images", "data")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pgm", ".ppm")

Batch = np.ndarray | dict[str, np.ndarray]


class Dataset(Protocol):
    """Anything with a length (samples) that yields batches of at most ``batch_size`` samples."""

    def __len__(self) -> int: ...

    def batches(self, batch_size: int) -> Iterator[Batch]: ...


def _float_array(array: Any, where: str) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype.kind != "f":
        raise InvalidInputError(
            f"{where} has dtype {array.dtype}; calibration data must be float, normalized as the "
            "model expects (e.g. x.astype(np.float32) / 255)"
        )
    if array.ndim < 1 or array.shape[0] == 0:
        raise InvalidInputError(f"{where} holds no samples (shape {array.shape})")
    return array.astype(np.float32, copy=False)


class ArrayDataset:
    """Samples along axis 0 of an array, or of every array of a ``{input name: array}`` dict."""

    def __init__(self, data: np.ndarray | Mapping[str, np.ndarray], where: str = "data") -> None:
        if isinstance(data, Mapping):
            self.arrays = {k: _float_array(v, f"{where}[{k!r}]") for k, v in data.items()}
            sizes = {len(v) for v in self.arrays.values()}
            if len(sizes) != 1:
                raise InvalidInputError(f"{where}: inputs have different sample counts {sizes}")
            self._length = sizes.pop()
        else:
            self.arrays = {"": _float_array(data, where)}
            self._length = len(self.arrays[""])

    def __len__(self) -> int:
        return self._length

    def batches(self, batch_size: int) -> Iterator[Batch]:
        """Consecutive slices of ``batch_size`` samples (the last may be shorter)."""
        for start in range(0, self._length, batch_size):
            part = {k: v[start : start + batch_size] for k, v in self.arrays.items()}
            yield part.get("", part)


@dataclass(frozen=True)
class ImageOptions:
    """How images become model inputs.

    Each image is converted to grayscale (``grayscale``) or RGB, resized to ``size`` =
    ``(height, width)`` (bilinear; ``None`` keeps the size, and all images must then match),
    scaled by ``scale`` (default 1/255, to 0..1), then normalized per channel as
    ``(x - mean) / std`` (``mean``/``std``: one value, or one per channel), and laid out
    channels-first ``(C, H, W)`` (``channels_first=True``) or ``(H, W, C)``.
    """

    size: tuple[int, int] | None = None
    grayscale: bool = False
    scale: float = 1 / 255
    mean: Sequence[float] = (0.0,)
    std: Sequence[float] = (1.0,)
    channels_first: bool = True

    def __post_init__(self) -> None:
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise InvalidInputError(f"image size must be (height, width) >= 1, got {self.size}")
        if any(s == 0 for s in self.std):
            raise InvalidInputError(f"image std must be non-zero, got {tuple(self.std)}")


def _pillow():
    try:
        from PIL import Image  # noqa: PLC0415 (Pillow is optional)
    except ImportError:
        raise UnsupportedError(
            "reading calibration images needs Pillow, which is not installed: pip install pillow"
        ) from None
    return Image


class ImageFolderDataset:
    """The images of a directory, read lazily batch by batch (see :class:`ImageOptions`)."""

    def __init__(self, folder: str | os.PathLike, options: ImageOptions | None = None) -> None:
        self.folder = Path(folder)
        self.options = options or ImageOptions()
        self.files = sorted(
            p for p in self.folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
        )
        if not self.files:
            raise InvalidInputError(
                f"{self.folder} contains no image files ({', '.join(IMAGE_SUFFIXES)})"
            )
        self._image = _pillow()

    def __len__(self) -> int:
        return len(self.files)

    def load(self, path: Path) -> np.ndarray:
        """One image as a float32 array prepared by the options."""
        opts = self.options
        try:
            with self._image.open(path) as opened:
                image = opened.convert("L" if opts.grayscale else "RGB")
            if opts.size is not None:
                height, width = opts.size
                image = image.resize((width, height), self._image.Resampling.BILINEAR)
            pixels = np.asarray(image, dtype=np.float32)
        except OSError as exc:
            raise InvalidInputError(f"cannot read image {path}: {exc}") from exc
        pixels = pixels.reshape(*pixels.shape[:2], -1) * np.float32(opts.scale)
        mean = np.asarray(opts.mean, dtype=np.float32)
        std = np.asarray(opts.std, dtype=np.float32)
        if mean.size not in (1, pixels.shape[2]) or std.size not in (1, pixels.shape[2]):
            raise InvalidInputError(
                f"mean {tuple(opts.mean)} / std {tuple(opts.std)} need 1 or {pixels.shape[2]} "
                "values"
            )
        pixels = (pixels - mean) / std
        return np.transpose(pixels, (2, 0, 1)) if opts.channels_first else pixels

    def batches(self, batch_size: int) -> Iterator[Batch]:
        """Stacks of ``batch_size`` prepared images."""
        for start in range(0, len(self.files), batch_size):
            yield self.read(start, start + batch_size)

    def read(self, start: int, stop: int) -> np.ndarray:
        """The prepared images ``start:stop`` (in file-name order), stacked."""
        images = [self.load(p) for p in self.files[start:stop]]
        shapes = {im.shape for im in images}
        if len(shapes) > 1:
            raise InvalidInputError(
                f"images in {self.folder} have different sizes {sorted(shapes)}; give a "
                "size to resize them to (--image-size H W)"
            )
        return np.stack(images).astype(np.float32, copy=False)


def load_dataset(
    source: Any, *, key: str | None = None, image_options: ImageOptions | None = None
) -> Dataset:
    """A :class:`Dataset` from an array, a mapping of arrays, a .npy/.npz file or a directory."""
    if hasattr(source, "batches") and hasattr(source, "__len__"):
        return source
    if isinstance(source, np.ndarray | Mapping):
        return ArrayDataset(source)
    if not isinstance(source, str | os.PathLike):
        raise InvalidInputError(
            "calibration data must be an array, a dict of arrays, a .npy/.npz file or a "
            f"directory of images, got {type(source).__name__}"
        )
    path = Path(source)
    if path.is_dir():
        return ImageFolderDataset(path, image_options)
    if not path.exists():
        raise InvalidInputError(f"calibration data {path} does not exist")
    if path.suffix == ".npy":
        return ArrayDataset(_np_load(path), str(path))
    if path.suffix == ".npz":
        return ArrayDataset(_npz_array(path, key), str(path))
    raise InvalidInputError(
        f"calibration data {path}: expected a .npy or .npz file or a directory of images"
    )


def _np_load(path: Path) -> Any:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc


def _npz_array(path: Path, key: str | None) -> np.ndarray:
    with _np_load(path) as archive:
        keys = list(archive.keys())
        if key is None:
            key = keys[0] if len(keys) == 1 else next((k for k in NPZ_KEYS if k in keys), None)
        if key is None or key not in keys:
            wanted = (
                f"key {key!r} is not"
                if key
                else "no key given and none of " + ", ".join(NPZ_KEYS) + " is"
            )
            raise InvalidInputError(
                f"{path}: {wanted} in the archive; its arrays: {', '.join(keys) or 'none'} "
                "(choose one with key=... / --key)"
            )
        try:
            return archive[key]
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read {key!r} from {path}: {exc}") from exc


def npz_arrays(source: str | os.PathLike, *, leave: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every array of a ``.npz`` file but those named in ``leave`` (a multi-input model's
    feeds, keyed by input name)."""
    path = Path(source)
    if not path.is_file():
        raise InvalidInputError(f"data {path} does not exist")
    with _np_load(path) as archive:
        try:
            return {k: archive[k] for k in archive.keys() if k not in leave}  # noqa: SIM118
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read {path}: {exc}") from exc
