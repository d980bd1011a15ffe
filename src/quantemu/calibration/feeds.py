"""Samples of a model with several inputs: ``{input name: array}``, batched per input.

A multi-input model is fed as onnxruntime feeds it: one array per graph input, each exactly as
the model takes it. The samples run along each input's own batch dimension, found from the
graph's input shape (:func:`batch_axes`):

- when every input shares one fixed leading dimension (a model exported with batch 1), axis 0
  of every input of rank >= 1 is the batch, as for a single-input model;
- otherwise an input's first symbolic dimension is its batch (axis 0 normally; a recurrent
  state ``(layers, N, hidden)`` holds it on axis 1);
- an input without a symbolic dimension (a fixed-shape input, a scalar) has no batch: its one
  array applies to every sample, and must have exactly the input's shape.

:class:`FeedSamples` checks the arrays once (names, dtypes, shapes, sample counts, NaN/Inf; each
error names the input and the remedy) and reads them by sample range, as
:class:`~quantemu.calibration.shards.ArraySamples` does for one array.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph import inputs
from quantemu.graph.ir import format_shape
from quantemu.graph.passes_shape import fixed_batch


def batch_axes(graph) -> dict[str, int | None]:
    """Each graph input's batch axis, ``None`` for an input without one (module docstring)."""
    if fixed_batch(graph) is not None:
        return {i.name: 0 if i.shape else None for i in graph.inputs}
    return {
        i.name: next((k for k, d in enumerate(i.shape) if not isinstance(d, int)), None)
        for i in graph.inputs
    }


def inputs_text(graph) -> str:
    """``'a' (shape Nx3x8x8), 'b' (shape 4)``: the model's inputs, for error messages."""
    return ", ".join(f"{i.name!r} (shape {format_shape(i.shape)})" for i in graph.inputs)


class FeedBatch(dict):
    """One batch of feeds (input name -> array), its sample count and the batch axes."""

    def __init__(self, feeds: Mapping[str, np.ndarray], size: int, axes: Mapping) -> None:
        super().__init__(feeds)
        self.size, self.axes = size, axes

    def head(self, count: int) -> FeedBatch:
        """The batch's first ``count`` samples (the inputs without a batch whole)."""
        return FeedBatch(
            {k: v if self.axes[k] is None else _take(v, self.axes[k], 0, count)
             for k, v in self.items()},
            min(count, self.size),
            self.axes,
        )  # fmt: skip


class FeedSamples:
    """The checked ``{input name: array}`` samples of ``graph``, read by sample range."""

    def __init__(self, graph, feeds: Any, where: str = "the feeds") -> None:
        self.names = [info.name for info in graph.inputs]
        self.axes = batch_axes(graph)
        if isinstance(feeds, FeedSamples):
            if feeds.axes == self.axes:  # checked already, for a graph with these inputs
                self.arrays, self._length = feeds.arrays, len(feeds)
                return
            feeds = feeds.arrays
        _check_names(graph, feeds, where)
        self.arrays = {
            info.name: _checked(info, feeds[info.name], self.axes[info.name], where)
            for info in graph.inputs
        }
        self._length = _sample_count(self.arrays, self.axes, where)

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"FeedSamples({', '.join(self.names)}; {self._length} samples)"

    def read(self, start: int, stop: int) -> FeedSamples:
        """Samples ``start:stop`` as a sample set of their own: every batched input sliced on
        its batch axis, the others as they are."""
        start, stop = max(0, start), min(stop, self._length)
        subset = object.__new__(FeedSamples)
        subset.names, subset.axes = self.names, self.axes
        subset.arrays = {
            name: array if self.axes[name] is None else _take(array, self.axes[name], start, stop)
            for name, array in self.arrays.items()
        }
        subset._length = max(0, stop - start)
        return subset

    def __getitem__(self, part: slice) -> FeedSamples:
        """``read`` of a slice with step 1 (``x[a:b]``, as of an array)."""
        start, stop, _ = part.indices(self._length)
        return self.read(start, stop)

    def batches(self, batch_size: int) -> Iterator[FeedBatch]:
        """Consecutive batches of ``batch_size`` samples (the calibration interface)."""
        for start in range(0, self._length, batch_size):
            part = self.read(start, start + batch_size)
            yield FeedBatch(part.arrays, len(part), self.axes)


def _take(array: np.ndarray, axis: int, start: int, stop: int) -> np.ndarray:
    index = [slice(None)] * array.ndim
    index[axis] = slice(start, stop)
    return array[tuple(index)]


def _check_names(graph, feeds: Any, where: str) -> None:
    if not isinstance(feeds, Mapping):
        raise InvalidInputError(
            f"{where}: a model with several inputs takes a dict {{input name: array}}, got "
            f"{type(feeds).__name__}; the model's inputs: {inputs_text(graph)}"
        )
    names = [info.name for info in graph.inputs]
    unknown = [str(k) for k in feeds if k not in names]
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        said = [f"no input named {', '.join(map(repr, unknown))}"] if unknown else []
        said += [f"no data for input {', '.join(map(repr, missing))}"] if missing else []
        raise InvalidInputError(
            f"{where}: {'; '.join(said)}; the model's inputs: {inputs_text(graph)} (give one "
            "array per input, keyed by its name)"
        )


def _checked(info, value: Any, axis: int | None, where: str) -> np.ndarray:
    """One input's array: float, of the input's shape (any size on its batch axis and on
    other symbolic dimensions), finite; as float32."""
    what = f"{where}: input {info.name!r}"
    array = inputs.as_array(value, info.name, f"{where}: input")
    if array.dtype.kind != "f":
        raise InvalidInputError(
            f"{what} has dtype {array.dtype}; pass float data as the float model takes it "
            "(e.g. x.astype(np.float32), normalized as the model expects)"
        )
    fixed = [(k, d) for k, d in enumerate(info.shape) if isinstance(d, int)]
    if array.ndim != len(info.shape) or any(array.shape[k] != d for k, d in fixed):
        batch = "it has no batch dimension: one array, applied to every sample"
        if axis is not None:
            batch = f"the samples run along axis {axis}"
        raise InvalidInputError(
            f"{what} has shape {tuple(array.shape)}; the model takes shape "
            f"{format_shape(info.shape)} "
            f"({batch}); pass it exactly as the model takes it"
        )
    # The non-finite check names the sample on axis 0: the batch axis is moved there for it.
    moved = np.moveaxis(array, axis, 0) if axis else array
    cast = inputs.float32_checked(moved, info.name, where=f"{where}: input")
    return np.moveaxis(cast, 0, axis) if axis else cast


def _sample_count(arrays: dict, axes: dict, where: str) -> int:
    """The sample count every batched input agrees on (1 when no input has a batch)."""
    counts = {name: arrays[name].shape[axis] for name, axis in axes.items() if axis is not None}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{name!r}: {n}" for name, n in counts.items())
        raise InvalidInputError(
            f"{where}: the inputs hold different numbers of samples ({listed}, along each "
            "input's batch axis); give every batched input the same samples"
        )
    count = next(iter(counts.values()), 1)
    if count == 0:
        raise InvalidInputError(f"{where}: the inputs hold no samples; pass at least one")
    return count
