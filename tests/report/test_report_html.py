"""The HTML report: one valid, self-contained document (inline CSS, plots as embedded PNG)."""

from __future__ import annotations

import base64
import html
import math
import sys
from html.parser import HTMLParser

import pytest

from quantemu.errors import UnsupportedError
from quantemu.report import render_html, write_html
from quantemu.simulate import Evaluation
from tests.report.helpers import layer


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


def test_html_report_of_the_demo_names_every_layer(demo_evaluations, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo.html"
    write_html(demo_evaluations, path, model="digits_cnn.onnx")
    document = path.read_text(encoding="utf-8")
    checker = _check_html(document)
    text = "".join(checker.text)
    assert "quantemu report: digits_cnn.onnx on xs3, nvdla" in text and "Comparison" in text
    for ev in demo_evaluations:
        assert f'<section id="{ev.backend}">' in document
        for stats in ev.layers:
            assert html.escape(stats.name) in document and stats.op in text
    assert len(checker.images) >= 2 * len(demo_evaluations)  # SQNR and counters, per backend
