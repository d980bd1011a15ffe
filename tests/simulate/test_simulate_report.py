"""Reports: terminal tables, JSON round trip, HTML validity and the missing-matplotlib error."""

from __future__ import annotations

import base64
import json
import math
import sys
from html.parser import HTMLParser

import pytest
from rich.console import Console
from stats_helpers import layer

from quantemu.errors import UnsupportedError
from quantemu.report import (
    comparison_table,
    evaluation_from_dict,
    evaluation_to_dict,
    load_json,
    print_evaluation,
    read_json,
    render_html,
    to_json,
    write_json,
)
from quantemu.simulate import Evaluation


def _text(renderable) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_terminal_report_shows_header_layers_and_summary(evaluation):
    console = Console(width=200, record=True, color_system=None)
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


def test_comparison_table_has_one_row_per_backend_and_errors(evaluation):
    other = Evaluation(**{**evaluation.__dict__, "backend": "nvdla", "backend_accuracy": 0.95})
    out = _text(
        comparison_table(
            [evaluation, other],
            timings={"xs3": (0.25, 1.5), "nvdla": (0.5, 2.0)},
            errors={"nnie": "cannot lower Softmax"},
        )
    )
    # a row's first line names the backend (variant and counters continue on further lines)
    firsts = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert [n for n in firsts if n in ("xs3", "nvdla", "nnie")] == ["xs3", "nvdla", "nnie"]
    assert "lib_nn" in firsts  # the header's variant under the backend name
    rows = [
        next(line for line in out.splitlines() if line.startswith(f"│ {b} "))
        for b in ("xs3", "nvdla", "nnie")
    ]
    assert "-5.00 pp" in rows[0] and "+0.00 pp" in rows[1]
    assert "softmax (-inf)" in rows[0] and "2/3" in rows[0] and "0.25 + 1.50" in rows[0]
    assert "error" in rows[2]
    assert "nnie: error: cannot lower Softmax" in [line.strip() for line in out.splitlines()]


def _strict_loads(text: str):
    def reject(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=reject)


def test_json_is_strict_and_round_trips(evaluation, tmp_path):
    path = tmp_path / "out.json"
    write_json([evaluation], path, model="m.onnx")
    document = _strict_loads(path.read_text())
    assert document["format"] == "quantemu-evaluation" and document["model"] == "m.onnx"
    layers = document["evaluations"][0]["layers"]
    assert [entry["sqnr_db"] for entry in layers] == ["inf", "-inf", 12.5]
    assert document["evaluations"][0]["counters"] == {
        "acc_saturation": 17,
        "output_saturation": 3,
    }
    (back,) = read_json(path)
    assert back == evaluation
    assert math.isinf(back.layers[0].sqnr_db) and back.layers[0].sqnr_db > 0


def test_json_without_labels_and_nan(evaluation):
    odd = Evaluation(
        **{
            **evaluation.__dict__,
            "float_accuracy": None,
            "backend_accuracy": None,
            "layers": (layer("x", cosine=math.nan),),
        }
    )
    document = _strict_loads(json.dumps(to_json([odd]), allow_nan=False))
    ev = document["evaluations"][0]
    assert ev["float_accuracy"] is None and ev["layers"][0]["cosine"] == "nan"
    (back,) = load_json(document)
    assert back.float_accuracy is None and math.isnan(back.layers[0].cosine)


def test_json_malformed_documents_are_clear_errors(evaluation):
    with pytest.raises(ValueError, match="not a quantemu evaluation document"):
        load_json({"format": "other"})
    broken = evaluation_to_dict(evaluation)
    del broken["layers"][0]["sqnr_db"]
    with pytest.raises(ValueError, match="missing or malformed field: 'sqnr_db'"):
        evaluation_from_dict(broken)
    broken = evaluation_to_dict(evaluation)
    broken["layers"][2]["sqnr_db"] = "big"
    with pytest.raises(ValueError, match="layer 'fc' sqnr_db: expected a number"):
        evaluation_from_dict(broken)


class _Checker(HTMLParser):
    """Collects tags, checks nesting of non-void elements, images and external references."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.seen: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.seen.append(tag)
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
            assert attrs.get("alt")
        for key in ("src", "href"):
            value = attrs.get(key, "")
            if value and not value.startswith(("data:", "#")):
                self.errors.append(f"external reference {value}")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _check_html(document: str) -> _Checker:
    checker = _Checker()
    checker.feed(document)
    checker.close()
    assert document.startswith("<!DOCTYPE html>")
    assert not checker.errors and not checker.stack, (checker.errors, checker.stack)
    assert "script" not in checker.seen and "link" not in checker.seen
    for src in checker.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    return checker


def test_html_report_is_valid_and_self_contained(evaluation):
    pytest.importorskip("matplotlib")
    document = render_html(evaluation, model="m.onnx")
    checker = _check_html(document)
    text = "".join(checker.text)
    # SQNR bars, counter bars, LSB histograms of the worst (non-exact) layers
    assert len(checker.images) == 3
    for expected in (
        "quantemu report: m.onnx on xs3",
        "ties toward +inf",
        "stem <conv>",  # escaped in the markup, text again once parsed
        "Softmax falls back to float & stays there",
        "acc_saturation=17",
        "90.00% (-5.00 pp)",
    ):
        assert expected in text, expected
    assert "stem &lt;conv&gt;" in document
    assert "<style>" in document and "Comparison" not in text


def test_html_report_of_several_backends_has_a_comparison(evaluation, tmp_path):
    pytest.importorskip("matplotlib")
    quiet = Evaluation(
        **{
            **evaluation.__dict__,
            "backend": "onednn",
            "layers": tuple(
                layer(f"l{i}", sqnr_db=math.inf, counters={"pair_saturation": 0}) for i in range(2)
            ),
        }
    )
    document = render_html([evaluation, quiet])
    checker = _check_html(document)
    text = "".join(checker.text)
    assert "Comparison" in text and 'href="#onednn"' in document
    assert "No counter fired on any layer" in text  # every counter zero: no counter plot
    assert "Every layer runs the target's bit-exact integer arithmetic." in text
    assert len(checker.images) == 3 + 1  # xs3: three plots; onednn: SQNR only (all exact)


def test_html_report_without_matplotlib_is_one_clear_error(evaluation, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(UnsupportedError, match=r"pip install 'quantemu\[report\]'"):
        render_html(evaluation)
