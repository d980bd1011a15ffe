"""The ``--against`` table: per layer, how many codes two targets disagree on, and by how much."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from quantemu.simulate.against import Disagreement


def against_table(result: Disagreement) -> Table:
    """One row per tensor both targets compute: differing codes, max LSB, the |diff| counts."""
    first, second = result.backends
    table = Table(
        title=f"{first} against {second}: codes that differ, per layer ({result.samples} samples)",
        caption=(
            f"own: codes {second}'s layer changes by itself, run on {first}'s inputs "
            "(differences that do not come from earlier layers)"
        ),
    )
    columns = ("layer", "op", "elements", "differ", "share", "max LSB", "|diff|: count", "own")
    for column in columns:
        table.add_column(column, justify="left" if column in ("layer", "op") else "right")
    for row in result.layers:
        if not row.comparable:
            table.add_row(row.layer, row.op, "", "", "", "", row.note, "")
            continue
        spread = ", ".join(f"{k}: {v}" for k, v in sorted(row.histogram.items())[:4])
        where = f" first at {row.first}" if row.first is not None else ""
        table.add_row(
            row.layer,
            row.op,
            f"{row.elements:,}",
            f"{row.differing:,}",
            f"{100 * row.fraction:.2f} %",
            str(row.max_lsb),
            (spread + where) or "-",
            f"{row.own_differing:,} (max {row.own_max_lsb})",
        )
    return table


def print_against(result: Disagreement, console: Console | None = None) -> None:
    """Print :func:`against_table`, then a one-line verdict."""
    console = console or Console()
    console.print(against_table(result))
    worst = [r for r in result.layers if r.comparable and r.differing]
    sources = [r.layer for r in result.layers if r.comparable and r.own_differing]
    if not worst:
        console.print(f"{result.backends[0]} and {result.backends[1]} agree on every code.")
    else:
        first = worst[0]
        console.print(
            f"{len(worst)} of {len(result.layers)} layers differ; the first is {first.layer} "
            f"({first.differing:,} codes, up to {first.max_lsb} LSB). Layers that differ by "
            f"themselves: {', '.join(sources) or 'none'}."
        )
