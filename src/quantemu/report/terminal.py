"""Terminal report: rich renderables for one evaluation, and a comparison of several.

- :func:`header_panel`: every result-changing choice (backend, variant, ISA, rounding, versions);
- :func:`layer_table`: one row per lowered layer: target op, exact / float-fallback marker,
  SQNR, cosine, max |error| in output LSBs, fraction of outputs off, counters;
- :func:`summary_table`: float vs backend top-1, agreement, worst layers, counter totals;
- :func:`comparison_table`: one row per backend.

:func:`print_evaluation` and :func:`print_comparison` print them on a console.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from quantemu.report import formatting as fmt
from quantemu.simulate.evaluate import Evaluation

_KIND_STYLE = {"exact": "green", "float": "yellow", "approx": "magenta"}


def _sqnr_cell(value: float) -> Text:
    style = "green" if value == float("inf") else ("red" if value < 20 else "")
    return Text(fmt.sqnr_text(value), style=style)


def header_panel(evaluation: Evaluation) -> Panel:
    """The header: every entry of ``evaluation.header``, key and value."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in evaluation.header.items():
        grid.add_row(str(key), str(value))
    grid.add_row("samples", f"{evaluation.samples:,}")
    return Panel(grid, title=f"quantemu · {evaluation.backend}", title_align="left", expand=False)


def layer_table(evaluation: Evaluation) -> Table:
    """One row per layer (see the module docstring); notes of non-exact layers as a caption."""
    table = Table(title=f"{evaluation.backend}: per-layer error vs the float model")
    table.add_column("#", justify="right")
    table.add_column("layer")
    table.add_column("target op")
    table.add_column("kind")
    table.add_column("SQNR dB", justify="right")
    table.add_column("cosine", justify="right")
    table.add_column("max |err| LSB", justify="right")
    table.add_column("% off", justify="right")
    table.add_column("counters")
    notes = []
    for index, stats in enumerate(evaluation.layers):
        kind = fmt.layer_kind(stats)
        if stats.note:
            notes.append(f"{index}: {stats.note}")
        table.add_row(
            str(index),
            stats.name,
            stats.op,
            Text(kind, style=_KIND_STYLE[kind]),
            _sqnr_cell(stats.sqnr_db),
            f"{stats.cosine:.6f}",
            str(stats.max_abs_lsb),
            fmt.percent_text(stats.fraction_off),
            fmt.counters_text(stats.counters),
        )
    kinds = sorted({fmt.layer_kind(s) for s in evaluation.layers})
    legend = "; ".join(f"{k}: {fmt.KINDS[k]}" for k in kinds)
    table.caption = "\n".join([legend, *notes])
    table.caption_justify = "left"
    return table


def step_table(evaluation: Evaluation) -> Table | None:
    """The SQNR of every time step of each recurrent layer (None when there is none)."""
    recurrent = [s for s in evaluation.layers if s.step_sqnr_db]
    if not recurrent:
        return None
    table = Table(title=f"{evaluation.backend}: SQNR dB per time step of the recurrent layers")
    table.add_column("layer")
    table.add_column("steps", justify="right")
    table.add_column("worst", justify="right")
    table.add_column("step 0, 1, 2, ...", overflow="fold")
    for stats in recurrent:
        steps = stats.step_sqnr_db
        worst = min(range(len(steps)), key=steps.__getitem__)
        table.add_row(
            stats.name,
            str(len(steps)),
            f"{fmt.sqnr_text(steps[worst])} (step {worst})",
            " ".join(fmt.sqnr_text(v) for v in steps),
        )
    return table


def summary_table(evaluation: Evaluation, *, worst: int = 3) -> Table:
    """Accuracies, agreement, the ``worst`` layers by SQNR and every counter's total."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    if evaluation.float_accuracy is not None:
        table.add_row("float top-1", fmt.accuracy_text(evaluation.float_accuracy))
        table.add_row(
            f"{evaluation.backend} top-1",
            f"{fmt.accuracy_text(evaluation.backend_accuracy)} "
            f"({fmt.delta_text(evaluation.float_accuracy, evaluation.backend_accuracy)})",
        )
    if evaluation.agreement is not None:
        table.add_row(
            "agreement",
            f"{fmt.accuracy_text(evaluation.agreement)} of {evaluation.samples:,} samples have the "
            "float model's top-1",
        )
    elif "top-1" in evaluation.header:  # not a classifier: say so rather than print a number
        table.add_row("top-1", "not computed: the output is not (N, classes) class scores")
    worst_layers = evaluation.worst_layers(worst)
    table.add_row(
        "worst layers", ", ".join(f"{s.name} ({fmt.sqnr_text(s.sqnr_db)} dB)" for s in worst_layers)
    )
    table.add_row("counters", fmt.counters_text(evaluation.counter_totals(), zeros=True) or "none")
    inexact = [s for s in evaluation.layers if not s.exact]
    table.add_row("not bit-exact", f"{len(inexact)} of {len(evaluation.layers)} layers")
    return table


def comparison_table(
    evaluations: Sequence[Evaluation],
    *,
    timings: Mapping[str, tuple[float, float]] | None = None,
    errors: Mapping[str, str] | None = None,
    order: Sequence[str] | None = None,
) -> Table:
    """One row per backend: accuracies, agreement, worst layer, counters.

    ``timings``: backend -> (compile seconds, evaluation seconds): accepted, not shown (the
    status lines and the JSON give them; the table keeps to 100 columns);
    ``errors``: backend -> message, for backends that could not run (a row each, the messages
    below the table); ``order``: backend names in row order (default: evaluations, then errors).
    """
    # Fits 100 columns (80 with short counters): the float model's accuracy once in the title,
    # accuracies never wrap, a long layer name is cut; variants, per-layer details and the
    # compile/run split are in each backend's own tables (run --layers).
    floats = {fmt.accuracy_text(ev.float_accuracy) for ev in evaluations}
    same_float = len(floats) == 1
    title = "float model vs each backend"
    table = Table(title=title + (f" (float top-1 {floats.pop()})" if same_float else ""))
    table.add_column("backend", no_wrap=True)
    if not same_float:
        table.add_column("float", justify="right", no_wrap=True)
    table.add_column("top-1 (Δ pp)", justify="right", no_wrap=True)
    table.add_column("agree", justify="right", no_wrap=True)
    table.add_column("worst layer", max_width=14, overflow="ellipsis", no_wrap=True)
    table.add_column("dB", justify="right", no_wrap=True)
    table.add_column("exact", justify="right", no_wrap=True)
    table.add_column("counters ≠ 0", overflow="fold", min_width=12)
    rows: dict[str, list] = {}
    for ev in evaluations:
        (worst,) = ev.worst_layers(1) or [None]
        delta = fmt.delta_text(ev.float_accuracy, ev.backend_accuracy).removesuffix(" pp")
        rows[ev.backend] = [
            ev.backend,
            *([] if same_float else [fmt.accuracy_text(ev.float_accuracy)]),
            f"{fmt.accuracy_text(ev.backend_accuracy)} ({delta})",
            fmt.accuracy_text(ev.agreement),
            "-" if worst is None else worst.name,
            "-" if worst is None else fmt.sqnr_text(worst.sqnr_db),
            f"{sum(s.exact for s in ev.layers)}/{len(ev.layers)}",
            fmt.counters_text(ev.counter_totals(), zeros=False, sep="\n") or "none",
        ]
    for backend in errors or {}:
        width = len(table.columns) - 2
        rows[backend] = [backend, Text("error", style="red"), *[""] * width]
    for backend in [*(order or ()), *rows]:
        if backend in rows:
            table.add_row(*rows.pop(backend))
    if errors:
        table.caption = "\n".join(f"{b}: error: {m}" for b, m in errors.items())
        table.caption_justify = "left"
        table.caption_style = "red"
    return table


def print_evaluation(
    evaluation: Evaluation, console: Console | None = None, *, layers: bool = True
) -> None:
    """Print the header panel, the per-layer table (``layers``) and the summary."""
    console = console or Console()
    parts = [header_panel(evaluation)]
    if layers:
        parts.append(layer_table(evaluation))
        steps = step_table(evaluation)
        if steps is not None:
            parts.append(steps)
    parts.append(summary_table(evaluation))
    console.print(Group(*parts))


def print_comparison(evaluations: Sequence[Evaluation], console: Console | None = None, **kw):
    """Print :func:`comparison_table` (keyword arguments go to it)."""
    console = console or Console()
    table = comparison_table(evaluations, **kw)
    # As wide as its contents, and never wider than 100 columns (or a narrower console).
    console.print(table, width=min(100, console.width))
