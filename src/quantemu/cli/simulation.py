"""Calibrate once, then compile and evaluate on several backends: what ``run`` and ``demo`` share.

:func:`simulate` drives :func:`quantemu.compile` (one calibration for every backend) with the
command line's progress bars and status lines; :func:`write_outputs` writes the HTML report and
the JSON document.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from quantemu.cli.console import progress_bar
from quantemu.errors import QuantemuError

if TYPE_CHECKING:
    from rich.console import Console

    from quantemu.calibration.ranges import CalibrationRanges
    from quantemu.graph import Graph
    from quantemu.simulate.evaluate import Evaluation


@dataclass
class Outcome:
    """What :func:`simulate` produced: evaluations, timings and per-backend errors."""

    backends: list[str] = field(default_factory=list)  # in the order they were asked for
    evaluations: list[Evaluation] = field(default_factory=list)
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # compile s, eval s
    errors: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # backend -> codes


def simulate(
    graph: Graph,
    backends: Sequence[str],
    calib: np.ndarray | None,
    x: np.ndarray,
    labels: np.ndarray | None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    observer: str = "minmax",
    batch_size: int = 64,
    progress: bool = False,
    keep_going: bool = False,
    status: Console | None = None,
    keep_outputs: bool = False,
    ranges: CalibrationRanges | None = None,
    client=None,
) -> Outcome:
    """Calibrate ``graph`` once, then compile and evaluate it on every backend.

    ``options``: ``{backend: {key: value or text}}`` for each backend's lowering. With
    ``keep_going`` a backend that fails is recorded in ``Outcome.errors`` and the others still
    run; otherwise the error propagates. ``calib`` may be ``None`` for a fully quantized model
    (an int8 TFLite file), whose own quantization is used. With ``keep_outputs`` the integer
    codes of every graph output, over all samples, are kept in ``Outcome.outputs``. Given
    ``ranges`` (``run --ranges``, written by ``calibrate --out``), every backend uses them and
    nothing is calibrated. ``x`` is an array or a lazily read sample set; with ``client`` (a
    ``dask.distributed.Client``) each backend's batches run on the cluster's workers.
    """
    from quantemu.simulate.compile import calibrate_for_backends, compile_model

    if ranges is not None:
        ranges_of = dict.fromkeys(backends, ranges)
    else:
        ranges_of = calibrate_for_backends(
            graph,
            backends,
            calib,
            options=options,
            observer=observer,
            batch_size=batch_size,
            progress=progress,
        )
    outcome = Outcome(backends=list(backends))
    if client is not None:
        return _side_by_side(
            graph, backends, (x, labels), outcome, client, options=options, ranges_of=ranges_of,
            batch_size=batch_size, progress=progress, keep_going=keep_going, status=status,
        )  # fmt: skip
    for backend in backends:
        try:
            start = time.perf_counter()
            own = (options or {}).get(backend, {})
            program = compile_model(graph, backend, None, calibration=ranges_of[backend], **own)
            compiled = time.perf_counter()
            codes: dict[str, list[np.ndarray]] = {name: [] for name in graph.outputs}

            def keep(result, codes=codes) -> None:
                for name, parts in codes.items():
                    parts.append(np.asarray(result.tensors[name].codes))

            with progress_bar(progress, f"simulating on {backend}", len(x)) as advance:
                evaluation = program.evaluate(
                    x,
                    labels,
                    batch_size=batch_size,
                    on_batch=advance,
                    on_result=keep if keep_outputs else None,
                    client=client,
                )
            if keep_outputs:
                outcome.outputs[backend] = {k: np.concatenate(v) for k, v in codes.items()}
            done = time.perf_counter()
        except QuantemuError as exc:
            if not keep_going:
                raise
            outcome.errors[backend] = str(exc)  # reported with the comparison table
            continue
        outcome.evaluations.append(evaluation)
        outcome.timings[backend] = (compiled - start, done - compiled)
        if status is not None:
            status.print(
                f"{backend}: compiled in {compiled - start:.2f} s, simulated "
                f"{len(x):,} samples in {done - compiled:.2f} s"
                + ("" if client is None else " on the cluster"),
                highlight=False,
            )
    return outcome


def _side_by_side(graph, backends, data, outcome, client, *, options, ranges_of, **how):
    """Compile every backend here, then evaluate them all on the cluster at once (their tasks
    queued together); each evaluation is what one process would report."""
    from quantemu.simulate.compile import compile_model
    from quantemu.simulate.evaluate import evaluate_side_by_side

    x, labels = data
    programs, compile_s = [], {}
    for backend in backends:
        try:
            start = time.perf_counter()
            own = (options or {}).get(backend, {})
            programs.append(
                compile_model(graph, backend, None, calibration=ranges_of[backend], **own)
            )
            compile_s[backend] = time.perf_counter() - start
        except QuantemuError as exc:
            if not how["keep_going"]:
                raise
            outcome.errors[backend] = str(exc)
    start = time.perf_counter()
    total = len(x) * len(programs)
    with progress_bar(how["progress"], "simulating on the cluster", total) as advance:
        evaluations = evaluate_side_by_side(
            programs, x, labels, client=client, batch_size=how["batch_size"], on_batch=advance
        )
    wall = time.perf_counter() - start
    for program, evaluation in zip(programs, evaluations, strict=True):
        outcome.evaluations.append(evaluation)
        outcome.timings[program.backend] = (compile_s[program.backend], wall)
    if how["status"] is not None:
        how["status"].print(
            f"{', '.join(p.backend for p in programs)}: simulated {len(x):,} samples each on "
            f"the cluster, side by side, in {wall:.2f} s",
            highlight=False,
        )
    return outcome


def print_outcome(
    outcome: Outcome, console: Console, *, tables: bool, layers: bool = True, compare: bool
) -> None:
    """Each evaluation's table (when ``tables``), then the comparison table (when ``compare``)."""
    from quantemu.report import print_comparison, print_evaluation

    if tables:
        for evaluation in outcome.evaluations:
            print_evaluation(evaluation, console, layers=layers)
    if compare:
        print_comparison(
            outcome.evaluations,
            console,
            timings=outcome.timings,
            errors=outcome.errors,
            order=outcome.backends,
        )


def write_outputs(
    outcome: Outcome,
    *,
    report: str | None,
    json_path: str | None,
    model: str,
    status: Console | None,
) -> list[str]:
    """Write the HTML report (every evaluation in one file) and the JSON document when asked.

    One that cannot be written does not stop the other; returns what was not written, as
    ``"--report PATH: reason"`` lines (empty when everything was written).
    """
    from quantemu.report import write_html, write_json

    failed = []
    if report and outcome.evaluations:
        try:
            write_html(outcome.evaluations, report, model=model)
            if status is not None:
                status.print(f"wrote the HTML report to {report}", highlight=False)
        except OSError as exc:
            failed.append(f"--report {report}: {exc.strerror or exc}")
    if json_path:
        try:
            write_json(outcome.evaluations, json_path, model=model, errors=outcome.errors)
            if status is not None and json_path != "-":
                status.print(f"wrote the JSON results to {json_path}", highlight=False)
        except OSError as exc:
            failed.append(f"--json {json_path}: {exc.strerror or exc}")
    return failed


def save_outputs(path: str, outputs: Mapping[str, np.ndarray], status: Console | None) -> None:
    """Write the output codes (name -> codes stacked over the samples) to ``path`` (.npz)."""
    with open(path, "wb") as f:  # a path without .npz is written as given
        np.savez(f, **outputs)
    if status is not None:
        shapes = ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in outputs.items())
        status.print(f"wrote the output codes to {path}: {shapes}", highlight=False)
