"""One run of one model on one or several backends: the home of multi-backend orchestration.

A :class:`Session` is what ``quantemu run`` and ``quantemu demo`` drive (the CLI only parses
and prints): it types every backend's options once, prepares the graph once
(:func:`~quantemu.simulate.plan.prepare_graph`), builds one
:class:`~quantemu.simulate.plan.BackendPlan` per backend (one calibration for the backends
whose toolchains see the same graph), lowers each plan once, and then

- :meth:`Session.evaluate`: evaluates the backends one after the other here, or side by side
  on a Dask cluster (their tasks queued together), keeping going past a backend that fails when
  asked to;
- :meth:`Session.compare`: compares two backends' codes layer by layer
  (:mod:`quantemu.simulate.against`), with the same programs.

Progress and status lines are the caller's: a session is given a ``progress`` factory (a
context manager per long task, yielding ``advance(n)``) and a ``status`` callback.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu.backends.registry import backend_spec
from quantemu.calibration.feeds import FeedSamples
from quantemu.calibration.ranges import CalibrationRanges
from quantemu.errors import QuantemuError
from quantemu.graph import Graph
from quantemu.program.options import LoweringOptions
from quantemu.simulate.against import Disagreement, compare_programs
from quantemu.simulate.compiled import Program
from quantemu.simulate.evaluate import Evaluation, evaluate_side_by_side
from quantemu.simulate.plan import (
    BackendPlan,
    OptionsLike,
    make_plans,
    needs_data,
    prepare_graph,
    typed_options_of,
)

#: ``progress(description, total)``: a context manager yielding ``advance(n)``.
ProgressFactory = Callable[[str, int], contextlib.AbstractContextManager]


@contextlib.contextmanager
def no_progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """The default progress: nothing shown."""
    del description, total
    yield lambda n: None


@dataclass
class Outcome:
    """What :meth:`Session.evaluate` produced: evaluations, timings and per-backend errors."""

    backends: list[str] = field(default_factory=list)  # in the order they were asked for
    evaluations: list[Evaluation] = field(default_factory=list)
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # compile s, eval s
    errors: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # backend -> codes


class Session:
    """One model, its backends and their options, planned and lowered once each.

    ``graph``: the model as loaded (not yet optimized); ``backends``: every backend the run
    involves, in order; ``options``: backend -> options (typed, or a mapping of values or their
    text), each typed here, once. ``ranges``: precomputed ranges every backend uses instead of
    calibrating (``run --ranges``). ``observer``, ``batch_size`` and ``calibration_progress``
    go to calibration (``batch_size`` to evaluation too). With ``keep_going`` a backend that
    fails is recorded in the outcome's errors and the others still run.

    The plans are built once, by the first call that needs them, on that call's ``calib``; later
    calls (``evaluate`` then ``compare``, say) reuse them and their programs, whatever ``calib``
    they pass: open another session to calibrate on other data.
    """

    def __init__(
        self,
        graph: Graph,
        backends: Sequence[str],
        options: Mapping[str, OptionsLike] | None = None,
        *,
        ranges: CalibrationRanges | None = None,
        observer: str = "minmax",
        batch_size: int = 64,
        keep_going: bool = False,
        progress: ProgressFactory = no_progress,
        calibration_progress: bool = False,
        status: Callable[[str], None] | None = None,
    ) -> None:
        self.loaded = graph
        self.backends = list(backends)
        self.options: dict[str, LoweringOptions] = typed_options_of(self.backends, options)
        self.ranges = ranges
        self.observer, self.batch_size, self.keep_going = observer, batch_size, keep_going
        self._progress, self._status = progress, status
        self._calibration_progress = calibration_progress
        self._graph: Graph | None = None
        self._plans: dict[str, BackendPlan] | None = None
        self._programs: dict[str, Program] = {}
        self._compile_s: dict[str, float] = {}
        self.errors: dict[str, str] = {}

    @property
    def calibration_free(self) -> bool:
        """Whether every backend's options select a pipeline that uses no ranges."""
        return not any(backend_spec(b).needs_calibration(o) for b, o in self.options.items())

    @property
    def needs_data(self) -> bool:
        """Whether calibration data is needed: not with precomputed ranges, nor when every
        backend's pipeline uses none, nor for a model that carries or fixes its own."""
        return self.ranges is None and needs_data(self.loaded, self.options)

    def prepare(self, data: Any = None) -> Graph:
        """The graph every backend starts from: checked, bound from ``data`` (float samples)
        and optimized, once; later calls return it as it is."""
        if self._graph is None:
            self._graph = prepare_graph(self.loaded, data)
        return self._graph

    def plans(self, calib: Any = None) -> dict[str, BackendPlan]:
        """Every backend's plan, built once (calibrating on ``calib`` where needed)."""
        if self._plans is None:
            self._plans = make_plans(
                self.prepare(calib),
                self.options,
                calib,
                given=self.ranges,
                errors=self.errors if self.keep_going else None,
                observer=self.observer,
                batch_size=self.batch_size,
                progress=self._calibration_progress,
            )
        return self._plans

    def program(self, backend: str, calib: Any = None) -> Program:
        """``backend``'s program, lowered once from its plan."""
        if backend in self.errors:
            raise QuantemuError(self.errors[backend])
        if backend not in self._programs:
            start = time.perf_counter()
            self._programs[backend] = self.plans(calib)[backend].lower()
            self._compile_s[backend] = time.perf_counter() - start
        return self._programs[backend]

    def evaluate(
        self,
        calib: Any,
        x: Any,
        labels: Any = None,
        *,
        backends: Sequence[str] | None = None,
        client: Any = None,
        keep_outputs: bool = False,
    ) -> Outcome:
        """Evaluate ``backends`` (default: all) on ``x``: here one after the other, or on
        ``client``'s cluster side by side. With ``keep_outputs`` the integer codes of every
        graph output, over all samples, are kept in ``Outcome.outputs`` (not with a cluster).
        ``x`` (and ``calib``) may be a dict ``{input name: array}``, batched per input
        (:mod:`~quantemu.calibration.feeds`)."""
        names = list(self.backends if backends is None else backends)
        outcome = Outcome(backends=names)
        self.plans(calib)
        if isinstance(x, Mapping):  # feeds by input name: checked once, counted per sample
            x = FeedSamples(self.prepare(calib), x)
        programs = self._compiled(names, calib, outcome)
        if client is not None:
            self._side_by_side(programs, x, labels, outcome, client)
            return outcome
        for program in programs:
            try:
                self._evaluate_one(program, x, labels, outcome, keep_outputs)
            except QuantemuError as exc:
                if not self.keep_going:
                    raise
                outcome.errors[program.backend] = str(exc)  # reported with the comparison
        return outcome

    def compare(self, calib: Any, x: Any, first: str, second: str) -> Disagreement:
        """Where, layer by layer, ``first``'s and ``second``'s codes disagree on ``x``."""
        self._say(f"comparing {first} with {second} ...")
        programs = (self.program(first, calib), self.program(second, calib))
        return compare_programs(programs, x, batch_size=self.batch_size)

    def _compiled(self, names: Sequence[str], calib: Any, outcome: Outcome) -> list[Program]:
        """The programs of ``names`` that could be lowered (the others' errors recorded)."""
        programs = []
        for name in names:
            try:
                programs.append(self.program(name, calib))
            except QuantemuError as exc:
                if not self.keep_going:
                    raise
                outcome.errors[name] = str(exc)
        return programs

    def _evaluate_one(self, program: Program, x, labels, outcome: Outcome, keep: bool) -> None:
        backend = program.backend
        start = time.perf_counter()
        codes: dict[str, list[np.ndarray]] = {name: [] for name in program.graph.outputs}

        def kept(result) -> None:
            for name, parts in codes.items():
                parts.append(np.asarray(result.tensors[name].codes))

        with self._progress(f"simulating on {backend}", len(x)) as advance:
            evaluation = program.evaluate(
                x,
                labels,
                batch_size=self.batch_size,
                on_batch=advance,
                on_result=kept if keep else None,
            )
        if keep:
            outcome.outputs[backend] = {k: np.concatenate(v) for k, v in codes.items()}
        seconds = time.perf_counter() - start
        outcome.evaluations.append(evaluation)
        outcome.timings[backend] = (self._compile_s[backend], seconds)
        self._say(
            f"{backend}: compiled in {self._compile_s[backend]:.2f} s, simulated "
            f"{len(x):,} samples in {seconds:.2f} s"
        )

    def _side_by_side(self, programs: list[Program], x, labels, outcome: Outcome, client) -> None:
        """Every program evaluated on the cluster at once (their tasks queued together); each
        evaluation is what one process would report."""
        start = time.perf_counter()
        with self._progress("simulating on the cluster", len(x) * len(programs)) as advance:
            evaluations = evaluate_side_by_side(
                programs, x, labels, client=client, batch_size=self.batch_size, on_batch=advance
            )
        wall = time.perf_counter() - start
        for program, evaluation in zip(programs, evaluations, strict=True):
            outcome.evaluations.append(evaluation)
            outcome.timings[program.backend] = (self._compile_s[program.backend], wall)
        self._say(
            f"{', '.join(p.backend for p in programs)}: simulated {len(x):,} samples each on "
            f"the cluster, side by side, in {wall:.2f} s"
        )

    def _say(self, line: str) -> None:
        if self._status is not None:
            self._status(line)


def compare_backends(
    graph: Graph,
    backends: Sequence[str],
    calib: Any = None,
    x: Any = None,
    *,
    options: Mapping[str, OptionsLike] | None = None,
    observer: str = "minmax",
    batch_size: int = 64,
) -> Disagreement:
    """Lower ``graph`` onto both ``backends`` with the same calibration ranges, run ``x``
    through both and compare their codes per tensor (:mod:`quantemu.simulate.against`)."""
    first, second = backends
    session = Session(graph, backends, options, observer=observer, batch_size=batch_size)
    return session.compare(calib, x, first, second)
