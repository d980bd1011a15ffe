"""The terminal report: header panel, per-layer table, summary and the backend comparison."""

from __future__ import annotations

from rich.console import Console

from quantemu.report import (
    comparison_table,
    header_panel,
    layer_table,
    print_comparison,
    print_evaluation,
    summary_table,
)
from quantemu.report.formatting import counters_text, sqnr_text
from quantemu.simulate import Evaluation


def _console() -> Console:
    return Console(width=200, record=True, color_system=None)


def _text(renderable) -> str:
    console = _console()
    console.print(renderable)
    return console.export_text()


def test_terminal_report_shows_header_layers_and_summary(evaluation):
    console = _console()
    print_evaluation(evaluation, console)
    out = console.export_text()
    for text in (
        "quantemu · xs3",
        "ties toward +inf",  # the header: every result-changing choice
        "stem <conv>",
        "float:Softmax",
        "fully_connected",
        " inf ",  # exact layer
        "-inf",
        "12.5",
        "acc_saturation=17",
        "output_saturation=3",
        "float: float fallback",
        "1: Softmax falls back to float & stays there",
        "95.00%",
        "90.00% (-5.00 pp)",
        "85.00% of 20 samples",
        "worst layers   softmax (-inf dB), fc (12.5 dB), stem <conv> (inf dB)",
        "acc_saturation=17 output_saturation=3",  # totals over layers, zeros included
        "not bit-exact  1 of 3 layers",
    ):
        assert text in out, text


def test_without_layers_the_table_is_left_out(evaluation):
    console = _console()
    print_evaluation(evaluation, console, layers=False)
    out = console.export_text()
    assert "quantemu · xs3" in out and "not bit-exact  1 of 3 layers" in out
    assert "per-layer error" not in out and "float:Softmax" not in out


def test_comparison_table_has_one_row_per_backend_and_errors(evaluation):
    other = Evaluation(**{**evaluation.__dict__, "backend": "nvdla", "backend_accuracy": 0.95})
    out = _text(
        comparison_table(
            [evaluation, other],
            timings={"xs3": (0.25, 1.5), "nvdla": (0.5, 2.0)},
            errors={"nnie": "cannot lower Softmax"},
        )
    )
    # a row's first line names the backend (counters continue on further lines)
    firsts = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert [n for n in firsts if n in ("xs3", "nvdla", "nnie")] == ["xs3", "nvdla", "nnie"]
    rows = [
        next(line for line in out.splitlines() if line.startswith(f"│ {b} "))
        for b in ("xs3", "nvdla", "nnie")
    ]
    assert "(-5.00)" in rows[0] and "(+0.00)" in rows[1] and "Δ pp" in out
    assert "softmax" in rows[0] and "-inf" in rows[0] and "2/3" in rows[0]
    assert "error" in rows[2]
    assert "nnie: error: cannot lower Softmax" in [line.strip() for line in out.splitlines()]


def test_comparison_order_puts_named_backends_first(evaluation):
    other = Evaluation(**{**evaluation.__dict__, "backend": "nvdla"})
    out = _text(comparison_table([evaluation, other], order=["nvdla"]))
    firsts = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert [n for n in firsts if n in ("xs3", "nvdla")] == ["nvdla", "xs3"]
    assert all(len(line) <= 100 for line in out.splitlines())


def test_demo_tables_render_every_layer_and_counter(demo_evaluations):
    for ev in demo_evaluations:
        header = _text(header_panel(ev))
        assert f"quantemu · {ev.backend}" in header and f"{ev.samples:,}" in header
        for key, value in ev.header.items():
            assert key in header and str(value)[:20] in header
        table = _text(layer_table(ev))
        assert f"{ev.backend}: per-layer error vs the float model" in table
        for index, stats in enumerate(ev.layers):
            row = next(line for line in table.splitlines() if f" {stats.name} " in line)
            assert row.split("│")[1].strip() == str(index)
            assert sqnr_text(stats.sqnr_db) in row and stats.op in row
        summary = _text(summary_table(ev))
        assert counters_text(ev.counter_totals(), zeros=True) in summary
        inexact = sum(not s.exact for s in ev.layers)
        assert f"not bit-exact  {inexact} of {len(ev.layers)} layers" in summary


def test_demo_comparison_has_every_backend(demo_evaluations):
    console = _console()
    print_comparison(demo_evaluations, console)
    out = console.export_text()
    assert "float model vs each backend" in out
    for ev in demo_evaluations:
        row = next(line for line in out.splitlines() if line.startswith(f"│ {ev.backend} "))
        assert f"{sum(s.exact for s in ev.layers)}/{len(ev.layers)}" in row
