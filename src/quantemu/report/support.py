"""The table of ``quantemu inspect --support``: which backend runs which operator of a model.

:func:`~quantemu.simulate.support.support_table` computes it (each backend lowers the graph
through a plan with sampled ranges); this module only renders it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quantemu.graph.ops.unsupported import UNSUPPORTED, describe
from quantemu.simulate.support import SupportTable, op_type

if TYPE_CHECKING:
    from rich.console import Console

_STYLES = {
    "exact": "green",
    "inexact": "yellow",
    "float": "yellow",
    "unsupported": "red",
    "error": "red",
}

__all__ = ["SupportTable", "print_support"]


def _styled(cell: str) -> str:
    style = _STYLES.get(cell.split(maxsplit=1)[0])
    return f"[{style}]{cell}[/]" if style else cell


def print_support(table: SupportTable, console: Console) -> None:
    """The table: one row per op type, one column per backend, then whole-backend errors."""
    from rich.table import Table  # noqa: PLC0415

    console.rule("support per backend")
    grid = Table("op type", "nodes", *table.backends)
    for op in table.op_types():
        count = sum(1 for n in table.graph.nodes if op_type(n) == op)
        cells = [table.cell(op, b) for b in table.backends]
        grid.add_row(op, str(count), *(_styled(c) for c in cells))
    console.print(grid)
    for backend, error in table.errors.items():
        console.print(f"{backend}: cannot lower the model: {error}", highlight=False, markup=False)
    unimported = [
        (n.attrs["onnx_op"], n.name, n.attrs["reason"])
        for n in table.graph.nodes
        if n.op_type == UNSUPPORTED
    ]
    if unimported:
        console.print("not imported:", highlight=False)
        console.print(describe(unimported), highlight=False, markup=False)
    console.print(
        f"ranges: {table.ranges}; exact = bit-exact integer layer, float = float fallback",
        highlight=False,
        markup=False,
    )
