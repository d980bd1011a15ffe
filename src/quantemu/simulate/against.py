"""Two targets on the same model and data: where, per layer, their integer codes disagree.

``compare_programs((xs3_program, tflite_program), x)`` (what ``quantemu run --against`` calls
through :meth:`~quantemu.simulate.session.Session.compare`, with two programs lowered from one run's
plans, so with the same calibration ranges) runs every sample through both and compares, for every
tensor both programs compute with the same quantization, the codes element by element: how many
differ, by how many LSB at most, and where the first difference is. Differences carry forward from
layer to layer, so each layer of the second target is also run on the first target's own inputs:
``own_differing`` / ``own_max_lsb`` are what that layer adds by itself. Tensors the two quantize
differently are listed without a code comparison (their LSBs are not the same unit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu.intmath import parallel
from quantemu.program import LinearEncoding
from quantemu.simulate.compiled import Program
from quantemu.simulate.streaming import sample_count


@dataclass
class LayerDisagreement:
    """One tensor of both programs: element counts, differing codes, the largest difference."""

    layer: str  # the first backend's layer that writes the tensor
    tensor: str
    op: str
    elements: int = 0
    differing: int = 0
    max_lsb: int = 0
    histogram: dict[int, int] = field(default_factory=dict)  # |difference| -> count
    first: tuple[int, ...] | None = None  # index (sample first) of the first difference
    comparable: bool = True
    note: str = ""
    # The same, when the second target's layer reads the first target's inputs: what the layer
    # itself adds, without the differences its inputs carry in.
    own_differing: int = 0
    own_max_lsb: int = 0

    @property
    def fraction(self) -> float:
        """The share of elements whose codes differ."""
        return self.differing / self.elements if self.elements else 0.0


@dataclass
class Disagreement:
    """The per-tensor comparison of two backends (see the module docstring)."""

    backends: tuple[str, str]
    samples: int
    layers: list[LayerDisagreement]


def compare_programs(programs: Sequence[Program], x: Any, *, batch_size: int = 64) -> Disagreement:
    """Run ``x`` through both ``programs`` and compare their codes per tensor."""
    programs = list(programs)
    rows = _rows(programs)
    x = programs[0].check_input(x)

    def run_batch(start: int) -> tuple[int, Mapping, Mapping, dict]:
        batch = x[start : start + batch_size]
        a, b = (p.run(batch, keep="all").tensors for p in programs)
        return start, a, b, _run_on_first_inputs(programs[1], a, b)

    starts = range(0, sample_count(x), batch_size)
    # layers fed only by inputs without a batch make the same codes in every batch: once
    once = programs[0].once_layers(x)
    later = [row for row in rows if row.layer not in once]
    window = parallel.threads()  # one batch per core at a time, compared in batch order
    for first_batch in range(0, len(starts), window):
        for start, a, b, own in parallel.map_tasks(
            run_batch, starts[first_batch : first_batch + window]
        ):
            _compare_batch(later if start else rows, start, a, b, own)
    backends = (programs[0].backend, programs[1].backend)
    return Disagreement(backends, sample_count(x), rows)


def _compare_batch(rows, start: int, a: Mapping, b: Mapping, own: Mapping) -> None:
    """Add one batch's codes of both targets (and the second's own layers) to ``rows``."""
    for row in rows:
        ta, tb = a[row.tensor], b[row.tensor]
        if row.comparable and not _same(ta.encoding, tb.encoding):
            row.comparable = False
            row.note = (
                f"quantized differently: {ta.encoding.describe()} vs {tb.encoding.describe()}"
            )
        if row.comparable:
            _update(row, ta.codes, tb.codes, start)
            diff = np.abs(ta.codes.astype(np.int64) - own[row.tensor].codes.astype(np.int64))
            row.own_differing += int(np.count_nonzero(diff))
            row.own_max_lsb = max(row.own_max_lsb, int(diff.max(initial=0)))


def _run_on_first_inputs(program: Program, first: Mapping, second: Mapping) -> dict:
    """Each layer of ``program`` on the first target's tensors where they share the
    quantization (its own tensors elsewhere): the codes each layer produces by itself."""
    tensors = dict(second)
    out = {}
    for layer in program.lowered.layers:
        inputs = []
        for name in layer.inputs:
            theirs, mine = first.get(name), tensors[name]
            use_theirs = theirs is not None and _same(theirs.encoding, mine.encoding)
            inputs.append(theirs if use_theirs else out.get(name, mine))
        out[layer.output] = layer.run(inputs).tensor
    return out


def _rows(programs: list[Program]) -> list[LayerDisagreement]:
    theirs = {layer.output: layer for layer in programs[1].lowered.layers}
    rows = []
    for layer in programs[0].lowered.layers:
        if layer.output not in theirs:
            continue
        rows.append(LayerDisagreement(layer.name, layer.output, layer.op))
    return rows


def _same(a, b) -> bool:
    if not (isinstance(a, LinearEncoding) and isinstance(b, LinearEncoding)):
        return a == b
    return (
        a.dtype == b.dtype
        and np.array_equal(np.float64(a.scale), np.float64(b.scale))
        and np.array_equal(np.int64(a.zero_point), np.int64(b.zero_point))
    )


def _update(row: LayerDisagreement, a: np.ndarray, b: np.ndarray, offset: int) -> None:
    diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
    row.elements += diff.size
    nonzero = diff != 0
    count = int(np.count_nonzero(nonzero))
    if not count:
        return
    row.differing += count
    row.max_lsb = max(row.max_lsb, int(diff.max()))
    values, counts = np.unique(diff[nonzero], return_counts=True)
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        row.histogram[v] = row.histogram.get(v, 0) + c
    if row.first is None:
        index = np.argwhere(nonzero)[0]
        row.first = (int(index[0]) + offset, *(int(i) for i in index[1:]))
