"""``quantemu.calibrate(graph, data, ...)``: observe every activation over a calibration set."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from quantemu.calibration.datasets import ImageOptions, load_dataset, npz_arrays
from quantemu.calibration.feeds import FeedBatch, FeedSamples
from quantemu.calibration.observers import OBSERVERS, make_observer
from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.errors import InvalidInputError
from quantemu.graph.executor import bind_inputs, iter_float
from quantemu.graph.inputs import check_finite, check_weights
from quantemu.graph.ir import Graph
from quantemu.graph.passes_shape import fixed_batch


def _graph(model: Any) -> Graph:
    if isinstance(model, Graph):
        return model
    if isinstance(model, str | os.PathLike | bytes):
        from quantemu.graph.loading import load_model  # noqa: PLC0415 (imports onnx/tflite)

        return load_model(model)
    raise InvalidInputError(
        f"calibrate expects a Graph or a model path, got {type(model).__name__}"
    )


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")


def calibrate(
    graph: Any,
    data: Any,
    observer: str = "minmax",
    per_channel: bool = False,
    *,
    axis: int = 1,
    tensors: Iterable[str] | None = None,
    batch_size: int = 32,
    limit: int | None = None,
    percentile: float = 99.99,
    bits: int = 8,
    symmetric: bool = False,
    key: str | None = None,
    image_options: ImageOptions | None = None,
    progress: bool | None = None,
) -> CalibrationRanges:
    """Run the float executor over ``data`` and observe the range of every activation.

    ``graph`` is a :class:`~quantemu.graph.Graph` (or a model path); ``data`` anything
    :func:`~quantemu.calibration.datasets.load_dataset` accepts (array, .npy/.npz path with
    ``key``, image directory with ``image_options``), or for any model a dict ``{input name:
    array}`` (for a model with several inputs also a .npz keyed by input name), batched along
    each input's batch axis (:mod:`~quantemu.calibration.feeds`). ``observer`` is ``"minmax"``,
    ``"percentile"`` (``percentile``, default 99.99) or ``"mse"`` (``bits``, ``symmetric``).
    With ``per_channel`` the ranges of tensors of rank >= 2 are per index of ``axis`` (default 1,
    the channels of NCHW and the features of (N, F)). ``tensors`` restricts the observed tensors
    (default: the graph inputs and every node output). ``limit`` caps the number of samples.
    ``progress``: show a progress bar (default: when stderr is a terminal).
    """
    graph = _graph(graph)
    check_weights(graph)
    if observer not in OBSERVERS:
        raise InvalidInputError(f"unknown observer {observer!r}; observers: {', '.join(OBSERVERS)}")
    _positive("batch_size", batch_size)
    batch_size = fixed_batch(graph) or batch_size  # a model with a fixed batch takes only that
    _positive("limit", limit)
    dataset = _dataset(graph, data, key, image_options)
    names = _tensor_names(graph, tensors)
    options = {"percentile": percentile, "bits": bits, "symmetric": symmetric}
    observers = {
        name: make_observer(
            observer, axis=_axis(graph, name, per_channel, axis), tensor=name, **options
        )
        for name in names
    }
    total = len(dataset) if limit is None else min(limit, len(dataset))
    batches = _limited(dataset.batches(batch_size), limit)
    samples, count = _observe(graph, batches, observers, _progress_bar(progress, total))
    ranges = {}
    for name, obs in observers.items():
        low, high = obs.range()
        ranges[name] = TensorRange(low, high, obs.axis)
    return CalibrationRanges(
        tensors=ranges,
        observer=observer,
        per_channel=per_channel,
        options=_used_options(observer, options, axis if per_channel else None),
        batches=count,
        samples=samples,
        model=graph.metadata.get("source", graph.name),
    )


def _dataset(graph: Graph, data: Any, key: str | None, image_options):
    """The calibration set: feeds by input name for a dict (or a multi-input model's .npz),
    else :func:`~quantemu.calibration.datasets.load_dataset`'s."""
    if isinstance(data, Mapping):
        return FeedSamples(graph, data, "calibration data")
    multi_npz = isinstance(data, str | os.PathLike) and str(data).endswith(".npz")
    if multi_npz and len(graph.inputs) > 1 and key is None:
        return FeedSamples(graph, npz_arrays(data), f"calibration data {data}")
    return load_dataset(data, key=key, image_options=image_options)


def _observe(graph: Graph, batches: Iterator, observers: dict, bar) -> tuple[int, int]:
    """Feed every batch's tensors to their observers; returns ``(samples, batches)``."""
    samples = count = 0
    with bar as advance:
        for batch in batches:
            size = _batch_size(batch)
            _check_finite(graph, batch, samples)
            for name, value in _values(graph, batch, observers.keys()):
                observers[name].update(value)
            samples, count = samples + size, count + 1
            advance(size)
    if samples == 0:
        raise InvalidInputError("the calibration set is empty")
    return samples, count


def _check_finite(graph: Graph, batch, offset: int) -> None:
    """The input's first NaN or +-Inf, with its index in the whole set (not the batch)."""
    named = batch if isinstance(batch, dict) else {graph.input_names[0]: batch}
    for name, value in named.items():
        check_finite(np.asarray(value), name, where="calibration data", offset=offset)


def _used_options(observer: str, options: dict, axis: int | None) -> dict:
    used = {"percentile": ("percentile",), "mse": ("bits", "symmetric")}.get(observer, ())
    out = {k: options[k] for k in used}
    if axis is not None:
        out["axis"] = axis
    return out


def _tensor_names(graph, tensors: Iterable[str] | None) -> list[str]:
    produced = [*graph.input_names, *(o for n in graph.nodes for o in n.outputs if o)]
    if tensors is None:
        return produced
    names = list(tensors)
    unknown = [n for n in names if n not in produced]
    if unknown:
        raise InvalidInputError(
            f"no activation named {', '.join(map(repr, unknown))} in graph {graph.name!r}; "
            f"activations: {', '.join(produced[:20])}" + (" ..." if len(produced) > 20 else "")
        )
    return names


def _axis(graph, name: str, per_channel: bool, axis: int) -> int | None:
    rank = graph.tensors[name].rank
    if not per_channel or rank < 2:
        return None
    if not -rank <= axis < rank:
        raise InvalidInputError(
            f"channel axis {axis} is out of range for tensor {name!r} of rank {rank}"
        )
    return axis % rank


def _values(graph, batch, wanted) -> Iterator[tuple[str, np.ndarray]]:
    """The wanted tensors' values for one batch, node by node (nothing else is kept)."""
    wanted = set(wanted)
    bound = bind_inputs(graph, batch)
    for name, value in bound.items():
        if name in wanted:
            yield name, value
    for _node, produced in iter_float(graph, bound):
        for name, value in produced.items():
            if name in wanted:
                yield name, value


def _batch_size(batch) -> int:
    if isinstance(batch, FeedBatch):
        return batch.size
    if isinstance(batch, dict):
        return len(next(iter(batch.values())))
    return len(batch)


def _limited(batches: Iterator, limit: int | None) -> Iterator:
    if limit is None:
        yield from batches
        return
    left = limit
    for batch in batches:
        if left <= 0:
            return
        part = batch
        if _batch_size(batch) > left:
            part = _head(batch, left)
        left -= _batch_size(part)
        yield part


def _head(batch, count: int):
    """The first ``count`` samples of a batch (a feed batch's unbatched inputs whole)."""
    if isinstance(batch, FeedBatch):
        return batch.head(count)
    if isinstance(batch, dict):
        return {k: v[:count] for k, v in batch.items()}
    return batch[:count]


@contextmanager
def _progress_bar(enabled: bool | None, total: int):
    """A rich progress bar on stderr; yields ``advance(n)``. Off when not a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield lambda n: None
        return
    # rich is imported here, not at the top, so that the command line starts quickly.
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeRemainingColumn,
    )

    columns = ("calibrating", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("calibrating", total=total)
        yield lambda n: bar.advance(task, n)
