"""quantemu's built-in demo: a small CNN for the 8x8 digits and its held-out data.

The files in this package are written by ``tools/train_demo_model.py`` (seeded, reproducible);
``digits_cnn.json`` records their provenance and the float accuracy on the test split.

>>> from quantemu.data import demo_dataset, demo_info
>>> x, y = demo_dataset("test")
>>> x.shape, x.dtype, y.shape
((360, 1, 8, 8), dtype('float32'), (360,))
>>> round(float(x.max()), 3), demo_info()["test_split"]["samples"]
(1.0, 360)
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError

_SPLITS = {"test": "digits_test.npz", "calib": "digits_calib.npz"}

#: Pixel values are 0..16; the model was trained on ``pixels / 16``.
PIXEL_SCALE = 16.0


def _file(name: str) -> Path:
    return Path(str(resources.files(__name__).joinpath(name)))


def demo_model_path() -> Path:
    """The path of the demo model, ``digits_cnn.onnx`` (input ``(N, 1, 8, 8)`` float32)."""
    return _file("digits_cnn.onnx")


def demo_info() -> dict[str, Any]:
    """The provenance record ``digits_cnn.json`` (accuracy, split, seed, versions)."""
    return json.loads(_file("digits_cnn.json").read_text(encoding="utf-8"))


def demo_dataset(split: str = "test", *, raw: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of a demo split: ``"test"`` (held out, 360) or ``"calib"`` (256 from training).

    ``x`` is ``(N, 1, 8, 8)`` float32 normalized as in training (pixels / 16), or the uint8
    pixels 0..16 with ``raw=True``; ``y`` holds int64 labels 0..9.
    """
    if split not in _SPLITS:
        raise InvalidInputError(f"unknown demo split {split!r}; splits: {', '.join(_SPLITS)}")
    with np.load(_file(_SPLITS[split])) as archive:
        x, y = archive["x"], archive["y"]
    if raw:
        return x, y
    return x.astype(np.float32) / np.float32(PIXEL_SCALE), y


__all__ = ["PIXEL_SCALE", "demo_dataset", "demo_info", "demo_model_path"]
