"""Activation ranges in quantization-aware training: observed (fixed) or learned.

``RangeMode.OBSERVED`` keeps the calibrated ranges for the whole training, as the backend's
toolchain would derive them from the calibration data. ``RangeMode.LEARNED`` makes the two ends
of every per-tensor range parameters (:class:`LearnedRanges`) that the optimizer moves with the
weights, through LSQ's gradient (:mod:`quantemu.torch.ste`); the backend then derives its
integer parameters from the current ranges at every forward pass, and ``QatModel.export`` writes
them into the model file. Per-channel ranges stay observed.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import torch

from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.errors import InvalidInputError


class RangeMode(enum.Enum):
    """Whether quantization-aware training keeps the calibrated ranges or learns them."""

    OBSERVED = "observed"
    LEARNED = "learned"


#: What choosing each :class:`RangeMode` means (``errors.choose`` lists them on a bad value).
MODE_MEANINGS = {
    "observed": "the calibrated ranges, fixed",
    "learned": "their ends trained with the weights, LSQ",
}


class LearnedRanges(torch.nn.Module):
    """The ``(low, high)`` of every per-tensor range, as one ``(tensors, 2)`` float64
    parameter."""

    def __init__(self, ranges: CalibrationRanges) -> None:
        super().__init__()
        self.names = tuple(n for n, r in ranges.tensors.items() if r.axis is None)
        self._index = {name: i for i, name in enumerate(self.names)}
        start = [[ranges.tensors[n].min, ranges.tensors[n].max] for n in self.names]
        # float64: the calibrated ends exactly (a float32 copy could move them, and with them the
        # integer parameters, before any training)
        self.bounds = torch.nn.Parameter(torch.tensor(start, dtype=torch.float64).reshape(-1, 2))

    def of(self, name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The ``(low, high)`` parameters of tensor ``name``'s range (``None``: not learned)."""
        i = self._index.get(name)
        return None if i is None else (self.bounds[i, 0], self.bounds[i, 1])

    def current(self, base: CalibrationRanges) -> CalibrationRanges:
        """``base`` with the learned ranges: each kept at least one float64 step wide, the only
        change made to the parameters' values (so the exported ranges are those lowered)."""
        values = self.bounds.detach().cpu().numpy().astype(np.float64)
        tensors = dict(base.tensors)
        for name, (low, top) in zip(self.names, values, strict=True):
            if not (np.isfinite(low) and np.isfinite(top)):
                raise InvalidInputError(
                    f"the learned range of {name!r} is not finite ({low}, {top}); lower the "
                    "learning rate"
                )
            tensors[name] = TensorRange(low, max(top, float(np.nextafter(low, np.inf))))
        return dataclasses.replace(base, tensors=tensors, observer=f"{base.observer}, learned")
