"""Calibration: observe activation ranges over a dataset with the float executor.

>>> import numpy as np, quantemu
>>> from quantemu.data import demo_dataset, demo_model_path
>>> graph = quantemu.load_onnx(demo_model_path())
>>> x, _ = demo_dataset("calib")
>>> ranges = quantemu.calibrate(graph, x[:64], observer="minmax")
>>> low, high = ranges["input"]
>>> low, high
(0.0, 1.0)

``quantemu.calibrate`` is :func:`calibrate` (the package is named ``calibration`` so that the
function can have the short name at the top level).
"""

from __future__ import annotations

from quantemu.calibration.api import calibrate
from quantemu.calibration.datasets import (
    ArrayDataset,
    Dataset,
    ImageFolderDataset,
    ImageOptions,
    load_dataset,
)
from quantemu.calibration.from_model import is_fully_quantized, ranges_from_model
from quantemu.calibration.observers import (
    OBSERVERS,
    MinMaxObserver,
    MSEObserver,
    Observer,
    PercentileObserver,
    make_observer,
)
from quantemu.calibration.ranges import CalibrationRanges, TensorRange

__all__ = [
    "OBSERVERS",
    "ArrayDataset",
    "CalibrationRanges",
    "Dataset",
    "ImageFolderDataset",
    "ImageOptions",
    "MSEObserver",
    "MinMaxObserver",
    "Observer",
    "PercentileObserver",
    "TensorRange",
    "calibrate",
    "is_fully_quantized",
    "load_dataset",
    "make_observer",
    "ranges_from_model",
]
