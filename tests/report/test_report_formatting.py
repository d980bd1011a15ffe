"""The text helpers shared by the terminal and HTML reports, on their edge values."""

from __future__ import annotations

import math

import pytest

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
from tests.report.helpers import layer


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (math.nan, "-"),  # no float reference (a compiled model)
        (0.0, "0.0"),
        (-0.04, "-0.0"),
        (41.25, "41.2"),  # a tie: formatting rounds half to even
        (99.95, "100.0"),
        (-3.0, "-3.0"),
    ],
)
def test_sqnr_text(value, text):
    assert sqnr_text(value) == text


def test_accuracy_and_delta_texts():
    assert accuracy_text(None) == "-"
    assert accuracy_text(0.0) == "0.00%" and accuracy_text(1.0) == "100.00%"
    assert accuracy_text(0.99995) == "100.00%"
    assert delta_text(None, 0.5) == delta_text(0.5, None) == delta_text(None, None) == "-"
    assert delta_text(0.9, 0.9) == "+0.00 pp"
    assert delta_text(0.0, 1.0) == "+100.00 pp" and delta_text(1.0, 0.0) == "-100.00 pp"


@pytest.mark.parametrize(
    ("fraction", "text"),
    [
        (0, "0"),
        (0.0, "0"),
        (1e-9, "<0.01%"),
        (9.999e-5, "<0.01%"),
        (1e-4, "0.01%"),  # the smallest fraction shown as a number
        (0.5, "50.00%"),
        (1.0, "100.00%"),
    ],
)
def test_percent_text(fraction, text):
    assert percent_text(fraction) == text


def test_counters_text():
    assert counters_text({}) == "" and counters_text({"a": 0}) == ""
    assert counters_text({"a": 0}, zeros=True) == "a=0"
    counters = {"z": 1234567, "a": 2, "m": 0}
    assert counters_text(counters) == "a=2 z=1,234,567"  # name order, thousands separated
    assert counters_text(counters, zeros=True, sep=", ") == "a=2, m=0, z=1,234,567"


def test_layer_kind_and_its_legend():
    assert layer_kind(layer("c")) == "exact"
    assert layer_kind(layer("c", exact=True, op="float:Softmax")) == "exact"  # exact wins
    assert layer_kind(layer("s", exact=False, op="float:Softmax")) == "float"
    assert layer_kind(layer("s", exact=False, op="softmax", note="Float FALLBACK")) == "float"
    assert layer_kind(layer("a", exact=False, op="tflite:ADD", note="reference kernel")) == "approx"
    assert set(KINDS) == {"exact", "float", "approx"}


def test_variant_text():
    assert variant_text({}) == ""
    assert variant_text({"rounding": "x", "isa": ""}) == ""  # empty values are not variants
    assert variant_text({"model": "device", "variant": "lib_nn", "isa": "avx2"}) == (
        "avx2, lib_nn, device"
    )
