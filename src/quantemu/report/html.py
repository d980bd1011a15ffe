"""The HTML report: one self-contained file (inline CSS, plots as embedded PNG, no scripts).

For each evaluation (one per backend) it holds the header (every result-changing choice), a
summary (float vs backend top-1, agreement, counter totals), the per-layer table, the plots

- per-layer SQNR (bars coloured by layer kind; layers equal to the float model drawn hatched
  at the top of the axis and labelled ``exact``),
- per-layer counters (saturation, LUT under/overflow...: one bar per counter and layer),
- histograms of the output error in LSBs of the worst layers (bins -8..8; the end bins hold
  the folded tails),

and notes on every layer that is not the target's bit-exact arithmetic. With several
evaluations a comparison table comes first.

Plots need matplotlib, the optional ``report`` extra (``pip install 'quantemu[report]'``); it is
imported only when a report is rendered, and :func:`require_matplotlib` says clearly when it is
missing.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from quantemu._version import __version__
from quantemu.errors import UnsupportedError
from quantemu.report.formatting import (
    KINDS,
    accuracy_text,
    counters_text,
    delta_text,
    layer_kind,
    percent_text,
    sqnr_text,
    variant_text,
)
from quantemu.simulate.evaluate import Evaluation
from quantemu.simulate.metrics import HIST_RANGE

_KIND_COLOUR = {"exact": "#2e7d32", "float": "#f9a825", "approx": "#8e24aa"}

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 14em; }
.exact { color: #2e7d32; } .float { color: #b28704; } .approx { color: #8e24aa; }
.bad { color: #c62828; font-weight: bold; }
img { max-width: 100%; display: block; margin: .8em 0; }
.note { color: #555; font-size: .9em; }
footer { margin-top: 3em; color: #777; font-size: .8em; }
"""


def require_matplotlib() -> Any:
    """Import matplotlib's Figure class, or raise a one-line error with the remedy."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415 (optional extra)
    except ImportError:
        raise UnsupportedError(
            "the HTML report needs matplotlib, which is not installed: "
            "pip install 'quantemu[report]'"
        ) from None
    return Figure


# -- plots --------------------------------------------------------------------------------------


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _img(data: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _layer_labels(evaluation: Evaluation) -> list[str]:
    return [f"{i}: {s.name}" for i, s in enumerate(evaluation.layers)]


def sqnr_plot(evaluation: Evaluation, figure_class) -> str:
    """Horizontal SQNR bars per layer, as base64 PNG."""
    layers = evaluation.layers
    sqnr = np.array([s.sqnr_db for s in layers], dtype=np.float64)
    finite = sqnr[np.isfinite(sqnr)]
    top = (float(finite.max()) if finite.size else 0.0) + 10.0
    bottom = min(0.0, float(finite.min()) - 5.0) if finite.size else 0.0
    shown = np.where(np.isposinf(sqnr), top, np.where(np.isneginf(sqnr), bottom, sqnr))
    fig = figure_class(figsize=(8, 1.2 + 0.28 * len(layers)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(layers))
    colours = [_KIND_COLOUR[layer_kind(s)] for s in layers]
    bars = ax.barh(y, shown, color=colours)
    for bar, value in zip(bars, sqnr, strict=True):
        if not math.isfinite(value):
            bar.set_hatch("//")
            bar.set_alpha(0.5)
        ax.annotate(
            "exact" if value == math.inf else sqnr_text(value),
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.set_yticks(y, _layer_labels(evaluation), fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(bottom, top + 8)
    ax.set_xlabel("SQNR vs the float model (dB)")
    ax.set_title(f"{evaluation.backend}: per-layer SQNR")
    for kind in sorted({layer_kind(s) for s in layers}):
        ax.bar(0, 0, color=_KIND_COLOUR[kind], label=kind)
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def step_plot(evaluation: Evaluation, figure_class) -> str | None:
    """SQNR per time step of each recurrent layer, as base64 PNG (None without one)."""
    recurrent = [s for s in evaluation.layers if s.step_sqnr_db]
    if not recurrent:
        return None
    fig = figure_class(figsize=(8, 3), layout="constrained")
    ax = fig.add_subplot()
    for stats in recurrent:
        values = np.array(stats.step_sqnr_db, dtype=np.float64)
        ax.plot(np.arange(values.size), np.where(np.isfinite(values), values, np.nan),
                marker=".", label=stats.name)  # fmt: skip
    ax.set_xlabel("time step")
    ax.set_ylabel("SQNR vs the float model (dB)")
    ax.set_title(f"{evaluation.backend}: per-step SQNR of the recurrent layers")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def counter_plot(evaluation: Evaluation, figure_class) -> str | None:
    """Bars of every counter per layer as base64 PNG; ``None`` when every counter is zero."""
    names = sorted({k for s in evaluation.layers for k, v in s.counters.items() if v})
    if not names:
        return None
    layers = evaluation.layers
    counts = np.array(
        [[int(s.counters.get(name, 0)) for name in names] for s in layers], dtype=np.int64
    )
    fig = figure_class(
        figsize=(8, 1.2 + 0.28 * len(layers) * max(1, len(names) / 2)), layout="constrained"
    )
    ax = fig.add_subplot()
    height = 0.8 / len(names)
    y = np.arange(len(layers))
    for j, name in enumerate(names):
        ax.barh(y + (j - (len(names) - 1) / 2) * height, counts[:, j], height, label=name)
    if counts.max() > 100 * max(1, counts[counts > 0].min()):
        ax.set_xscale("symlog", linthresh=1)
    else:
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_yticks(y, _layer_labels(evaluation), fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"count over {evaluation.samples:,} samples")
    ax.set_title(f"{evaluation.backend}: counters per layer")
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def histogram_plot(evaluation: Evaluation, figure_class, worst: int = 3) -> str | None:
    """LSB-error histograms of the ``worst`` layers (lowest SQNR, not exact) as base64 PNG."""
    chosen = [s for s in evaluation.worst_layers(worst) if s.sqnr_db != math.inf]
    if not chosen:
        return None
    bins = np.arange(-HIST_RANGE, HIST_RANGE + 1)
    labels = [str(b) for b in bins]
    labels[0], labels[-1] = f"≤{-HIST_RANGE}", f"≥{HIST_RANGE}"
    fig = figure_class(figsize=(4 * len(chosen), 3.4), layout="constrained")
    for index, stats in enumerate(chosen, start=1):
        ax = fig.add_subplot(1, len(chosen), index)
        counts = np.asarray(stats.lsb_histogram, dtype=np.int64)
        ax.bar(bins, counts, color=_KIND_COLOUR[layer_kind(stats)], width=0.85)
        if counts.max() > 0:
            ax.set_yscale("log")
            ax.set_ylim(bottom=0.5)
        ax.set_xticks(bins[::2], labels[::2], fontsize=7)
        ax.set_xlabel("output error (LSB)")
        ax.set_title(f"{stats.name}\nSQNR {sqnr_text(stats.sqnr_db)} dB", fontsize=8)
    fig.axes[0].set_ylabel("outputs")
    fig.suptitle(f"{evaluation.backend}: output error in LSBs, worst layers", fontsize=10)
    return _png(fig)


# -- HTML ---------------------------------------------------------------------------------------


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric=frozenset()) -> str:
    """A <table>; cells are escaped, except :class:`_Raw` markup."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            text = cell.html if isinstance(cell, _Raw) else _esc(cell)
            css = ' class="num"' if index in numeric else ""
            cells.append(f"<td{css}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class _Raw:
    """Markup that :func:`_table` inserts unescaped (built from escaped parts)."""

    def __init__(self, markup: str) -> None:
        self.html = markup


def _kind_cell(stats) -> _Raw:
    kind = layer_kind(stats)
    return _Raw(f'<span class="{kind}">{kind}</span>')


def _key_values(items: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in items)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _comparison(evaluations: Sequence[Evaluation]) -> str:
    rows = []
    for ev in evaluations:
        (worst,) = ev.worst_layers(1) or [None]
        rows.append(
            [
                _Raw(f'<a href="#{_esc(ev.backend)}">{_esc(ev.backend)}</a>'),
                variant_text(ev.header),
                accuracy_text(ev.float_accuracy),
                accuracy_text(ev.backend_accuracy),
                delta_text(ev.float_accuracy, ev.backend_accuracy),
                accuracy_text(ev.agreement),
                "-" if worst is None else f"{worst.name} ({sqnr_text(worst.sqnr_db)} dB)",
                f"{sum(s.exact for s in ev.layers)}/{len(ev.layers)}",
                counters_text(ev.counter_totals(), zeros=True, sep=", ") or "none",
            ]
        )
    headers = ["backend", "variant", "float top-1", "backend top-1", "Δ", "agreement"]
    headers += ["worst layer", "exact layers", "counters"]
    return "<h2>Comparison</h2>" + _table(headers, rows, numeric={2, 3, 4, 5, 7})


def _layers(evaluation: Evaluation) -> str:
    rows = [
        [
            index,
            stats.name,
            stats.op,
            _kind_cell(stats),
            stats.encoding,
            sqnr_text(stats.sqnr_db),
            f"{stats.cosine:.6f}",
            stats.max_abs_lsb,
            percent_text(stats.fraction_off),
            counters_text(stats.counters, sep=", "),
        ]
        for index, stats in enumerate(evaluation.layers)
    ]
    headers = ["#", "layer", "target op", "kind", "output encoding", "SQNR dB", "cosine"]
    headers += ["max |err| LSB", "% off", "counters"]
    return _table(headers, rows, numeric={0, 5, 6, 7, 8})


def _notes(evaluation: Evaluation) -> str:
    items = [
        f'<li><b>{index}: {_esc(s.name)}</b> ({_esc(s.op)}, <span class="{layer_kind(s)}">'
        f"{layer_kind(s)}</span>){': ' + _esc(s.note) if s.note else ''}</li>"
        for index, s in enumerate(evaluation.layers)
        if not s.exact or s.note
    ]
    if not items:
        return "<p>Every layer runs the target's bit-exact integer arithmetic.</p>"
    legend = "; ".join(f"<b>{k}</b>: {_esc(v)}" for k, v in KINDS.items())
    return f'<p class="note">{legend}</p><ul>{"".join(items)}</ul>'


def _section(evaluation: Evaluation, figure_class, worst: int) -> str:
    summary = [
        ("float top-1", accuracy_text(evaluation.float_accuracy)),
        (
            f"{evaluation.backend} top-1",
            f"{accuracy_text(evaluation.backend_accuracy)} "
            f"({delta_text(evaluation.float_accuracy, evaluation.backend_accuracy)})",
        ),
        ("agreement with float top-1", accuracy_text(evaluation.agreement)),
        ("samples", f"{evaluation.samples:,}"),
        ("counters", counters_text(evaluation.counter_totals(), zeros=True, sep=", ") or "none"),
    ]
    parts = [
        f'<section id="{_esc(evaluation.backend)}"><h2>{_esc(evaluation.backend)}</h2>',
        "<h3>Header</h3>",
        _key_values(list(evaluation.header.items())),
        "<h3>Summary</h3>",
        _key_values(summary),
        "<h3>Per-layer error vs the float model</h3>",
        _layers(evaluation),
        "<h3>Plots</h3>",
        _img(sqnr_plot(evaluation, figure_class), f"{evaluation.backend} per-layer SQNR"),
    ]
    counters = counter_plot(evaluation, figure_class)
    parts.append(
        _img(counters, f"{evaluation.backend} counters per layer")
        if counters
        else "<p>No counter fired on any layer (no saturation, no LUT under/overflow).</p>"
    )
    steps = step_plot(evaluation, figure_class)
    if steps:
        parts.append(_img(steps, f"{evaluation.backend} per-step SQNR"))
    histograms = histogram_plot(evaluation, figure_class, worst)
    if histograms:
        parts.append(_img(histograms, f"{evaluation.backend} LSB error histograms"))
    parts += [
        "<h3>Notes: layers that are not bit-exact, and remarks</h3>",
        _notes(evaluation),
        "</section>",
    ]
    return "\n".join(parts)


def render_html(
    evaluations: Evaluation | Sequence[Evaluation],
    *,
    title: str | None = None,
    model: str = "",
    worst: int = 3,
) -> str:
    """The report as one HTML document (see the module docstring)."""
    figure_class = require_matplotlib()
    if isinstance(evaluations, Evaluation):
        evaluations = [evaluations]
    backends = ", ".join(ev.backend for ev in evaluations)
    title = title or f"quantemu report: {model + ' on ' if model else ''}{backends}"
    body = [f"<h1>{_esc(title)}</h1>"]
    if len(evaluations) > 1:
        body.append(_comparison(evaluations))
    body += [_section(ev, figure_class, worst) for ev in evaluations]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<footer>quantemu {_esc(__version__)}</footer>\n</body>\n</html>\n"
    )


def write_html(
    evaluations: Evaluation | Sequence[Evaluation], path: str | os.PathLike, **kwargs
) -> None:
    """Write :func:`render_html`'s document to ``path``."""
    text = render_html(evaluations, **kwargs)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
