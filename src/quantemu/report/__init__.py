"""Reports of whole-model simulations: terminal tables, a self-contained HTML file, JSON.

Everything here renders :class:`~quantemu.simulate.Evaluation` results (``prog.evaluate(x, y)``):

- :mod:`~quantemu.report.terminal`: rich tables: the header panel (every result-changing choice),
  the per-layer table, a summary, and a comparison of several backends;
- :mod:`~quantemu.report.html`: one HTML file with inline CSS and matplotlib plots embedded as
  PNG (matplotlib is the optional ``report`` extra: ``pip install 'quantemu[report]'``);
- :mod:`~quantemu.report.json_report`: a strict JSON document (non-finite SQNR values encoded as
  strings) and reading it back into :class:`~quantemu.simulate.Evaluation` objects.

The HTML module imports matplotlib only when it renders, so ``import quantemu.report`` works
without it.
"""

from quantemu.report.html import render_html, require_matplotlib, write_html
from quantemu.report.json_report import (
    evaluation_from_dict,
    evaluation_to_dict,
    load_json,
    read_json,
    to_json,
    write_json,
)
from quantemu.report.terminal import (
    comparison_table,
    header_panel,
    layer_table,
    print_comparison,
    print_evaluation,
    summary_table,
)

__all__ = [
    "comparison_table",
    "evaluation_from_dict",
    "evaluation_to_dict",
    "header_panel",
    "layer_table",
    "load_json",
    "print_comparison",
    "print_evaluation",
    "read_json",
    "render_html",
    "require_matplotlib",
    "summary_table",
    "to_json",
    "write_html",
    "write_json",
]
