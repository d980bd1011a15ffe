"""``Program.run`` on any number of samples in bounded memory.

``keep="outputs"`` (the default) runs the samples in batches and keeps, of every batch, only the
graph outputs' codes and every layer's counters (summed): peak memory is the result plus the
working sets of the batches in flight. The batches run side by side, one per core
(:func:`quantemu.intmath.parallel.map_tasks`), so that a batch of images uses every core whatever
the layers do inside. A first round of one sample per core measures the bytes a sample's tensors
take; the batches are sized so that those in flight hold about :data:`BATCH_BYTES` together, at
most :data:`MAX_BATCH` samples together (a 224x224 ResNet-18 holds tens of megabytes per sample, so
its batches are single images; the demo CNN holds kilobytes). Small batches keep the kernels'
temporaries in reused memory: fresh allocations beyond glibc's mmap threshold (32 MiB) cost a
page fault per page on every call, which made batch 16 cost more than 16 single images.

``keep="all"`` keeps every layer's tensors for the whole input in one pass, as the per-layer
tools need; ``keep="internals"`` keeps each layer's internals too (accumulators: an int64 one
takes 8 bytes per output element, so they are kept only on request). Its size grows with the
input: a probe batch measures the bytes per sample, and an input whose tensors would exceed
:data:`KEEP_ALL_LIMIT` is refused before the work, naming the remedy (``keep="outputs"``, or
slices of the input).

Streaming needs every graph output to carry the batch on axis 0 (a symbolic leading dimension);
a model whose outputs do not (a fixed batch, an output transposed away from the batch) runs in
one pass, under the same limit as ``keep="all"``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ops._spec import split_dim
from quantemu.intmath import parallel
from quantemu.program import QTensor, RunResult
from quantemu.program.model import KeptTensors

#: Bytes of tensors the streamed batches in flight may hold together.
BATCH_BYTES = 16 * 1024**2
#: Samples in the streamed batches in flight at most (kernels' temporaries are several times the
#: tensors).
MAX_BATCH = 2048
#: Bytes of tensors ``keep="all"`` may hold for the whole input.
KEEP_ALL_LIMIT = 2 * 1024**3
#: Samples in the probe batch that measures the bytes per sample for ``keep="all"``.
PROBE = 8


class Keep(enum.Enum):
    """What ``Program.run`` keeps: the graph outputs' codes, every layer's tensors, or every
    layer's tensors and internals (accumulators, pre-quantization values)."""

    OUTPUTS = "outputs"
    ALL = "all"
    INTERNALS = "internals"


#: What choosing each :class:`Keep` means (``errors.choose`` lists them on a bad value).
KEEP_MEANINGS = {
    "outputs": "the graph outputs, bounded memory",
    "all": "every layer's tensors",
    "internals": "their internals too",
}


def result_bytes(result: RunResult) -> int:
    """Bytes held by a result's tensors and layer internals."""
    held = sum(np.asarray(t.codes).nbytes for t in result.tensors.values())
    internals = (v for layer in result.internals.values() for v in layer.values())
    return held + sum(np.asarray(v).nbytes for v in internals)


def elements_per_sample(shapes: Sequence[tuple]) -> int:
    """Elements per sample of tensors of these shapes (the symbolic batch, or a flattened
    ``batch*k``, counts as one sample; a fixed size counts whole)."""
    total = 0
    for shape in shapes:
        count = 1
        for dim in shape:
            count *= split_dim(dim)[1]
        total += count
    return total


def sample_count(x) -> int:
    """The samples of an array (its axis 0; one for a scalar) or of a sample set (its
    ``len``: feeds batched per input)."""
    if isinstance(x, np.ndarray):
        return int(x.shape[0]) if x.ndim else 1
    return len(x)


def run_in_batches(
    run_batch: Callable[[Any], RunResult],
    x: Any,
    outputs: Sequence[str],
    keep: Keep,
    *,
    streamable: bool,
    elements: int,
    once: frozenset[str] = frozenset(),
) -> RunResult:
    """Run ``x`` (an array, batch first, or feeds sliced by sample range) through
    ``run_batch`` as the module docstring says; ``elements``: the elements per sample of every
    tensor the program makes (:func:`elements_per_sample`); ``once``: the layers whose counters
    count once per run, not once per batch (``Program.once_layers``)."""
    n = sample_count(x)
    if keep is Keep.OUTPUTS and streamable and n > 1:
        return _streamed(run_batch, x, outputs, once)
    # Codes, plus at most an int64 accumulator per element: 16 bytes bound a layer's output.
    small = elements * 16 * n <= KEEP_ALL_LIMIT // 2
    if n <= PROBE or small:
        result = run_batch(x)
        return result if keep is not Keep.OUTPUTS else _outputs_only(result, outputs)
    probe = run_batch(x[:PROBE])
    need = max(1, result_bytes(probe) // PROBE) * n
    if need > KEEP_ALL_LIMIT:
        raise InvalidInputError(
            f"keeping every layer's tensors for {n:,} samples needs about "
            f"{need / 1024**3:.1f} GiB (limit {KEEP_ALL_LIMIT / 1024**3:.0f} GiB); run with "
            "keep='outputs' (only the graph outputs, in batches), or run slices of the "
            "input (x[i:i + k]) and keep what you need of each"
        )
    result = run_batch(x)
    return result if keep is not Keep.OUTPUTS else _outputs_only(result, outputs)


def _streamed(
    run_batch: Callable[[Any], RunResult], x: Any, outputs: Sequence[str], once: frozenset[str]
) -> RunResult:
    """The outputs of ``x`` in batches, run side by side on the cores (one batch per core).

    A first round of one sample per core measures the bytes a sample's tensors take; the rest
    goes in batches that keep every core's tensors near ``BATCH_BYTES / cores`` together, at
    least one batch per core. Each batch is exact on its own (every layer computes sample by
    sample), so the split changes no code and no counter.
    """
    n = sample_count(x)
    cores = parallel.threads()

    def outputs_of(part: slice) -> RunResult:
        return _outputs_only(run_batch(x[part]), outputs)

    first = min(n, cores)
    probes = parallel.map_tasks(lambda i: run_batch(x[i : i + 1]), range(first))
    per_sample = max(1, *(result_bytes(p) for p in probes))
    parts = [_outputs_only(p, outputs) for p in probes]
    rest = n - first
    if rest:
        # the batches in flight together hold what one batch held before: the same peak
        size = int(np.clip(BATCH_BYTES // (cores * per_sample), 1, max(1, MAX_BATCH // cores)))
        size = min(size, -(-rest // cores))  # every core gets a batch
        parts += parallel.map_tasks(
            outputs_of, [slice(a, min(a + size, n)) for a in range(first, n, size)]
        )
    return _joined(parts, outputs, once)


def _outputs_only(result: RunResult, outputs: Sequence[str]) -> RunResult:
    tensors = KeptTensors({name: result.tensors[name] for name in outputs})
    return RunResult(tensors=tensors, counters=result.counters, outputs=result.outputs)


def _joined(parts: list[RunResult], outputs: Sequence[str], once: frozenset[str]) -> RunResult:
    """The batches' outputs concatenated on the batch axis, their counters summed (those of
    the ``once`` layers taken from the first batch)."""
    tensors = KeptTensors()
    for name in outputs:
        first = parts[0].tensors[name]
        codes = np.concatenate([p.tensors[name].codes for p in parts])
        tensors[name] = QTensor(codes, first.encoding)
    counters: dict[str, dict[str, int]] = {}
    for i, part in enumerate(parts):
        for layer, values in part.counters.items():
            if i and layer in once:
                continue
            total = counters.setdefault(layer, {})
            for key, value in values.items():
                total[key] = total.get(key, 0) + int(value)
    joined = {o: np.concatenate([p.outputs[o] for p in parts]) for o in outputs}
    return RunResult(tensors=tensors, counters=counters, outputs=joined)
