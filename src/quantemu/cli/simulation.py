"""What ``run`` and ``demo`` share: a session that shows its progress, and the outcome's output.

:func:`open_session` gives a :class:`~quantemu.simulate.session.Session` (which plans,
calibrates, lowers, evaluates and compares) the command line's progress bars and status lines;
:func:`print_outcome` prints its tables; :func:`write_outputs` writes the HTML report and the
JSON document; :func:`save_outputs` the output codes.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from quantemu.cli.console import progress_bar, stderr_console

if TYPE_CHECKING:
    from rich.console import Console

    from quantemu.graph import Graph
    from quantemu.simulate.session import Outcome, Session


def open_session(
    graph: Graph,
    backends: Sequence[str],
    options: Mapping[str, Any] | None = None,
    *,
    quiet: bool,
    keep_going: bool,
    **how: Any,
) -> Session:
    """A :class:`~quantemu.simulate.session.Session` that shows its progress bars and status
    lines on stderr (none when ``quiet``, bars only on a terminal); ``how``: ``ranges``,
    ``observer``, ``batch_size``."""
    from quantemu.simulate.session import Session

    bars = not quiet and sys.stderr.isatty()
    console = stderr_console(quiet)
    return Session(
        graph,
        backends,
        options,
        keep_going=keep_going,
        progress=functools.partial(progress_bar, bars),
        calibration_progress=bars,
        status=None if console is None else functools.partial(console.print, highlight=False),
        **how,
    )


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
