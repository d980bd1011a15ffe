"""Evaluation: a dataset through the float model and the lowered program, layer by layer.

:func:`evaluate` is what ``Program.evaluate`` and ``quantemu run`` call. It streams the data in
batches, runs the float executor with every intermediate and the integer program on the same
batch, and accumulates :mod:`~quantemu.simulate.metrics` per layer, plus top-1 accuracy when
labels are given. Top-1 and agreement exist only for a classifier's ``(N, classes)`` output;
for any other output they are ``None`` and the header says why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu.calibration.feeds import FeedSamples
from quantemu.calibration.shards import ArraySamples, open_samples
from quantemu.errors import InvalidInputError
from quantemu.graph import inputs
from quantemu.graph.passes_shape import fixed_batch
from quantemu.intmath import parallel
from quantemu.program import RunResult
from quantemu.simulate.metrics import BatchStats, LayerAccumulator, top1


@dataclass(frozen=True)
class LayerStats:
    """One layer's statistics over the evaluated data (see :mod:`~quantemu.simulate.metrics`)."""

    name: str
    op: str
    output: str
    exact: bool
    note: str
    encoding: str
    elements: int
    sqnr_db: float
    cosine: float
    max_abs_lsb: int
    fraction_off: float
    lsb_histogram: tuple[int, ...]
    counters: Mapping[str, int]
    step_sqnr_db: tuple[float, ...] = ()  # per time step, for a recurrent layer


@dataclass(frozen=True)
class Evaluation:
    """The result of :func:`evaluate`: header, per-layer statistics and accuracies."""

    backend: str
    header: Mapping[str, str]
    layers: tuple[LayerStats, ...]
    samples: int
    float_accuracy: float | None
    backend_accuracy: float | None
    # Fraction of samples where the backend's top-1 equals the float top-1; None without a float
    # reference or for an output that is not a classifier's (N, classes) scores.
    agreement: float | None

    def worst_layers(self, n: int = 3) -> list[LayerStats]:
        """The ``n`` layers with the lowest SQNR."""
        return sorted(self.layers, key=lambda s: s.sqnr_db)[:n]

    def counter_totals(self) -> dict[str, int]:
        """Every counter summed over all layers."""
        totals: dict[str, int] = {}
        for layer in self.layers:
            for key, value in layer.counters.items():
                totals[key] = totals.get(key, 0) + int(value)
        return totals

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (``quantemu run --json``)."""
        return {
            "backend": self.backend,
            "header": dict(self.header),
            "samples": self.samples,
            "float_accuracy": self.float_accuracy,
            "backend_accuracy": self.backend_accuracy,
            "agreement": self.agreement,
            "counters": self.counter_totals(),
            "layers": [
                {**layer.__dict__, "counters": dict(layer.counters)} for layer in self.layers
            ],
        }


def evaluate(
    program,
    x,
    labels=None,
    *,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    client=None,
) -> Evaluation:
    """Run ``x`` through both models: the model's single input, batch first, or a dict
    ``{input name: array}`` batched per input (:mod:`~quantemu.calibration.feeds`).

    ``x`` is float data, or the model's own integer input codes for a pre-quantized model: an
    array, or a sample set read lazily (``.npy``/``.npz`` path, glob or list of shards, image
    folder: :func:`~quantemu.calibration.shards.open_samples`). ``on_batch(n)`` is called after
    each batch with its size (progress bars); ``on_result`` with each batch's
    :class:`~quantemu.program.RunResult` (to keep the target's output codes). ``client``: a
    ``dask.distributed.Client``: the batches run on its workers, which read the samples
    themselves (:mod:`quantemu.simulate.distributed`); the result is the same, field for field.
    """
    schedule = _schedule(program, x, labels, batch_size)
    totals, measure, starts = schedule.totals, schedule.measure, schedule.starts
    if client is not None:
        if on_result is not None:
            raise InvalidInputError(
                "on_result (keeping every batch's codes) is not available with a cluster: the "
                "codes stay on the workers; evaluate without client= to keep them"
            )
        from quantemu.simulate.distributed import measure_on_cluster  # noqa: PLC0415

        for done in measure_on_cluster(client, measure, starts, on_batch):
            totals.add(done)
    else:
        # One batch per core at a time, each measured on its own thread, added in batch order.
        window = parallel.threads()
        for first in range(0, len(starts), window):
            for done in parallel.map_tasks(measure, starts[first : first + window]):
                if on_result is not None:
                    on_result(done.result)
                totals.add(done)
                if on_batch is not None:
                    on_batch(done.size)
    return _evaluation(program, totals, schedule.floats, len(schedule.samples))


def evaluate_side_by_side(
    programs, x, labels=None, *, client, batch_size: int = 128, on_batch=None
) -> list[Evaluation]:
    """:func:`evaluate` of every program on ``client``'s cluster, their tasks queued together
    so that the evaluations run side by side; each result is what :func:`evaluate` gives."""
    from quantemu.simulate.distributed import collect, submit  # noqa: PLC0415

    schedules = [_schedule(program, x, labels, batch_size) for program in programs]
    pending = [submit(client, schedule.measure, schedule.starts) for schedule in schedules]
    evaluations = []
    for schedule, queued in zip(schedules, pending, strict=True):
        for done in collect(queued, on_batch):
            schedule.totals.add(done)
        program = schedule.measure.program
        samples = len(schedule.samples)
        evaluations.append(_evaluation(program, schedule.totals, schedule.floats, samples))
    return evaluations


@dataclass(frozen=True)
class _Schedule:
    """An evaluation set up: its samples, the running totals, the measuring function, the
    batch starts and whether the model has a float reference."""

    samples: Any
    totals: Any
    measure: Any
    starts: range
    floats: bool


def _schedule(program, x, labels, batch_size: int) -> _Schedule:
    samples = _samples(program, x)
    labels = inputs.check_labels(labels, len(samples))
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a positive int, got {batch_size!r}")
    out_name = program.graph.outputs[0]
    classes = inputs.static_classes(program.graph)
    if classes is not True:  # known before the work: check the labels now
        inputs.check_label_range(labels, classes, out_name, program.graph.tensors[out_name].shape)
    batch_size = fixed_batch(program.graph) or batch_size  # a fixed model batch takes only that
    floats = has_float_reference(program.graph)
    totals = _Totals(program, labels, out_name, classes, once=program.once_layers(samples))
    measure = _Measure(program, floats, out_name, samples, batch_size, totals.acc)
    return _Schedule(samples, totals, measure, range(0, len(samples), batch_size), floats)


def _samples(program, x):
    """``x`` as a sample set: a checked array, or a set whose batches are checked as read."""
    if isinstance(x, Mapping | FeedSamples):  # feeds by input name, checked once
        return program.check_input(x)
    if isinstance(x, np.ndarray) or not _is_source(x):
        checked = program.check_input(x)  # a multi-input model's error names its inputs
        return checked if isinstance(checked, FeedSamples) else ArraySamples(checked)
    samples = open_samples(x)
    if len(samples) == 0:
        raise InvalidInputError(f"the evaluation data {x!r} holds no sample")
    return samples


def _is_source(x) -> bool:
    """A sample set, a path or glob, or a list of paths (anything else is taken as an array)."""
    if hasattr(x, "read") and hasattr(x, "__len__"):
        return True
    if isinstance(x, str | os.PathLike):
        return True
    return isinstance(x, list | tuple) and bool(x) and isinstance(x[0], str | os.PathLike)


def _evaluation(program, totals: _Totals, floats: bool, samples: int) -> Evaluation:
    out_name = totals.out_name
    header = dict(program.header)
    if not floats:
        header["float reference"] = NO_FLOAT
    if totals.classes is None:
        header["top-1"] = inputs.not_classifier_text(out_name, ("N", *totals.output_shape))
    return Evaluation(
        backend=program.backend,
        header=header,
        layers=tuple(_stats(layer, totals.acc[layer.name]) for layer in program.lowered.layers),
        samples=samples,
        **_accuracies(totals.labels, totals.float_pred, totals.backend_pred),
    )


@dataclass(frozen=True)
class _Batch:
    """One measured batch: where it starts and its size, every layer's statistics, the output's
    classes and per-sample shape, the top-1 of the target and of the float model (``None``
    without one), and the run itself (``None`` when it came from a cluster worker)."""

    start: int
    size: int
    stats: dict[str, BatchStats]
    classes: int | None
    output_shape: tuple
    backend_top1: np.ndarray
    float_top1: np.ndarray | None
    result: RunResult | None = None


@dataclass(frozen=True)
class _Measure:
    """``self(start)``: the float model and the program on samples ``start : start +
    batch_size``, measured layer by layer (safe to call from several threads at once)."""

    program: Any
    floats: bool
    out_name: str
    samples: Any
    batch_size: int
    acc: dict[str, LayerAccumulator]

    def __call__(self, start: int, *, keep_result: bool = True) -> _Batch:
        program = self.program
        batch = self.samples.read(start, start + self.batch_size)
        if not isinstance(self.samples, ArraySamples | FeedSamples):
            batch = program.check_input(batch)  # a lazily read set is checked batch by batch
        reference = (
            program.graph.run_float(program.float_input(batch), intermediates=True)
            if self.floats
            else None
        )
        result = program.run(batch, keep="all")
        stats = {
            layer.name: self.acc[layer.name].measure(
                result.tensors[layer.output],
                None if reference is None else reference[layer.output],
                result.counters[layer.name],
            )
            for layer in program.lowered.layers
        }
        output = result.outputs[self.out_name]
        return _Batch(
            start=start,
            size=int(output.shape[0]),
            stats=stats,
            classes=inputs.classes_of(output),
            output_shape=tuple(output.shape[1:]),
            backend_top1=top1(output),
            float_top1=None if reference is None else top1(reference[self.out_name]),
            result=result if keep_result else None,
        )


@dataclass
class _Totals:
    """What :func:`evaluate` sums over batches, added in batch order."""

    program: Any
    labels: np.ndarray | None
    out_name: str
    classes: Any  # static_classes' answer, then classes_of the first batch's output
    acc: dict[str, LayerAccumulator] = field(init=False)
    float_pred: list = field(default_factory=list)
    backend_pred: list = field(default_factory=list)
    output_shape: tuple = ()
    once: frozenset[str] = frozenset()  # layers measured on the first batch only

    def __post_init__(self) -> None:
        self.acc = accumulators(self.program)

    def add(self, done: _Batch) -> None:
        for layer in self.program.lowered.layers:
            if done.start and layer.name in self.once:
                continue  # the same values and counters as the first batch's
            self.acc[layer.name].add(done.stats[layer.name])
        self.output_shape = done.output_shape
        if done.start == 0:
            self.classes = done.classes
            inputs.check_label_range(
                self.labels, self.classes, self.out_name, ("N", *done.output_shape)
            )
        if self.classes is not None:
            if done.float_top1 is not None:
                self.float_pred.append(done.float_top1)
            self.backend_pred.append(done.backend_top1)


def _accuracies(labels, float_pred: list, backend_pred: list) -> dict[str, float | None]:
    """Top-1 accuracies and agreement; ``None`` where not computed (no labels, no float
    reference, or an output that is not a classifier's)."""
    backend = np.concatenate(backend_pred) if backend_pred else None
    reference = np.concatenate(float_pred) if float_pred else None
    return {
        "float_accuracy": None
        if labels is None or reference is None
        else float(np.mean(reference == labels)),
        "backend_accuracy": None
        if labels is None or backend is None
        else float(np.mean(backend == labels)),
        "agreement": None
        if reference is None or backend is None
        else float(np.mean(reference == backend)),
    }


NO_FLOAT = (
    "none: a compiled model's custom operators have no float meaning (counters only; run the "
    "int8 model it was compiled from for error statistics)"
)


def has_float_reference(graph) -> bool:
    """False for a graph with compiled custom operators (an ``.xcore.tflite`` model)."""
    return not any(node.op_type == "TfliteCustom" for node in graph.nodes)


def _stats(layer, accumulator: LayerAccumulator) -> LayerStats:
    done = accumulator.finish()
    return LayerStats(
        name=layer.name,
        op=layer.op,
        output=layer.output,
        exact=bool(layer.exact),
        note=layer.note,
        encoding=accumulator.encoding_text,
        elements=done["elements"],
        sqnr_db=done["sqnr_db"],
        cosine=done["cosine"],
        max_abs_lsb=done["max_abs_lsb"],
        fraction_off=done["fraction_off"],
        lsb_histogram=tuple(done["lsb_histogram"]),
        counters=done["counters"],
        step_sqnr_db=tuple(done["step_sqnr_db"]),
    )


def accumulators(program) -> dict[str, LayerAccumulator]:
    """A fresh :class:`LayerAccumulator` per layer of ``program`` (with its time axis)."""
    return {
        layer.name: LayerAccumulator(step_axis=layer.step_axis) for layer in program.lowered.layers
    }
