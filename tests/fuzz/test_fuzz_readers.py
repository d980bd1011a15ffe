"""Fuzz the two text readers: conformance vector lines and calibration-ranges documents.

A vector line parses to a Case or to a MalformedCase that says why; a Case then runs to a
verdict without an internal error. A ranges document loads to ranges that are usable (finite,
ordered, consistently shaped) or raises a QuantemuError (fuzz_helpers).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from typing import Any

import numpy as np
import pytest
from fuzz_helpers import FAST, examples, mutated, outcome
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.conformance.reader import Case, MalformedCase, parse_line
from quantemu.conformance.runner import run_case
from quantemu.conformance.suite import bundled_files

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _shortest_lines() -> dict[str, bytes]:
    lines = {}
    for vf in bundled_files():
        with vf.source.open("rb") as raw, gzip.GzipFile(fileobj=raw) as stream:
            lines[vf.display] = min(stream.read().splitlines(), key=len)
    return lines


LINES = _shortest_lines()
NAMES = sorted(LINES)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 1, 255, 256, -129, 2**31, 2**62, 2**64, 10**30])
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "nan", "inf", "int8", "float16", "AAEC", "0x7f", "\udcff"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
HOSTILE_VALUE = JSON | st.sampled_from(
    [[2**40, 2**40], [0, 2**62], [-1], [1.5], [True], {"dtype": "int8"}, "AAECAw==", "zz"]
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node of a decoded JSON value (lists of numbers count as leaves)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list) and value and isinstance(value[0], dict | list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_json(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one node replaced, deleted, or given an extra key."""
    doc = json.loads(json.dumps(document))
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return draw(HOSTILE_VALUE)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    kind = draw(st.sampled_from(["replace", "replace", "delete", "extra"]))
    if kind == "delete":
        del parent[path[-1]]
    elif kind == "extra" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=5))] = draw(HOSTILE_VALUE)
    else:
        parent[path[-1]] = draw(HOSTILE_VALUE)
    return doc


# --- conformance vectors -------------------------------------------------------------------------


def _check_line(raw: bytes) -> None:
    item = outcome(parse_line, raw, "fuzz.jsonl", 1)
    assert isinstance(item, Case | MalformedCase), item
    if isinstance(item, MalformedCase):
        assert item.reason.strip()
        return
    result = outcome(run_case, item)
    assert not result.traceback, f"internal error in {item.backend}/{item.op}: {result.reason}"


@settings(**examples(400))
@given(st.sampled_from(NAMES).flatmap(lambda n: mutated_json(json.loads(LINES[n]))))
def test_mutated_vector_fields(case: Any) -> None:
    _check_line(json.dumps(case).encode())


@settings(**FAST)
@given(st.sampled_from(NAMES).flatmap(lambda n: mutated(LINES[n])))
def test_mutated_vector_bytes(raw: bytes) -> None:
    _check_line(raw)


def test_bundled_lines_pass() -> None:
    for name in NAMES:
        item = parse_line(LINES[name], name, 1)
        assert isinstance(item, Case), item
        assert run_case(item).reason == "", name


# --- calibration ranges --------------------------------------------------------------------------

RANGES = CalibrationRanges(
    {
        "x": TensorRange(-1.5, 3.25),
        "conv_w": TensorRange([-1.0, -0.5], [1.0, 0.25], axis=0),
    },
    observer="minmax",
    options={"percentile": 99.9},
    batches=2,
    samples=64,
    model="demo",
).to_json()


def _usable(ranges: CalibrationRanges) -> None:
    """What the rest of quantemu relies on in loaded ranges."""
    assert isinstance(ranges.observer, str)
    assert ranges.batches >= 0 and ranges.samples >= 0
    for name, r in ranges.items():
        assert isinstance(name, str)
        low, high = np.asarray(r.min), np.asarray(r.max)
        assert low.shape == high.shape, name
        assert np.all(np.isfinite(low)) and np.all(np.isfinite(high)), name
        assert np.all(low <= high), name
        if r.axis is not None:
            assert type(r.axis) is int and r.axis >= 0 and low.ndim == 1 and low.size, name
    json.loads(ranges.dumps())


def _ranges_with(name: str, **entry: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(RANGES))
    document["tensors"][name].update(entry)
    return document


@settings(**examples(500))
# Found by this fuzzer: each loaded into ranges that were not usable.
@example(_ranges_with("conv_w", min=None))
@example(_ranges_with("x", min=5.0))
@example(_ranges_with("x", max=float("nan")))
@example(_ranges_with("x", axis="channels"))
@example(_ranges_with("conv_w", max=[1.0]))
@example(_ranges_with("x", max=10**400))  # OverflowError
@example({**RANGES, "options": {"percentile": float("inf")}})  # could not be saved again
@given(mutated_json(RANGES))
def test_mutated_ranges_document(document: Any) -> None:
    ranges = outcome(CalibrationRanges.from_json, document)
    if ranges is not None:
        _usable(ranges)


@settings(**FAST)
@example(b"\x80" + json.dumps(RANGES).encode())  # UnicodeDecodeError escaped load()
@given(mutated(json.dumps(RANGES).encode()))
def test_mutated_ranges_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ranges.json")
        with open(path, "wb") as out:
            out.write(data)
        ranges = outcome(CalibrationRanges.load, path)
    if ranges is not None:
        _usable(ranges)


def test_ranges_round_trip() -> None:
    loaded = CalibrationRanges.from_json(RANGES)
    _usable(loaded)
    assert loaded.to_json() == json.loads(json.dumps(RANGES))
    assert math.isclose(loaded["x"].max, 3.25)
