"""The oneDNN 3.2.0 LSTM/GRU vectors (tools/make_onednn_rnn_vectors.py): well formed, and what
they pin down about the library, so that a regeneration that changes either is noticed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantemu.conformance.reader import Case, collect_files, read_cases

VECTORS = Path(__file__).resolve().parents[2] / "data" / "onednn_rnn"


@pytest.fixture(scope="module")
def cases():
    found = list(read_cases(collect_files([VECTORS])))
    assert found and all(isinstance(c, Case) for c in found)  # no malformed case
    return found


def test_every_cell_direction_and_isa_is_covered(cases):
    seen = {(c.op, c.attrs["direction"], c.attrs["isa"]) for c in cases}
    assert seen == {
        (op, d, isa)
        for op in ("lstm", "gru")
        for d in ("l2r", "r2l", "concat", "sum")
        for isa in ("avx2", "avx512_core", "avx512_core_vnni")
    }


def test_shapes_follow_the_primitive(cases):
    for case in cases:
        gates = 4 if case.op == "lstm" else 3
        t, n, c = case.inputs["src_layer"].shape
        layers, d = case.attrs["layers"], 2 if case.attrs["direction"] in ("concat", "sum") else 1
        assert case.inputs["weights_layer"].shape == (layers, d, c, gates, c)
        width = 2 * c if case.attrs["direction"] == "concat" else c
        assert case.expected["dst_layer"].shape == (t, n, width)
        assert case.expected["dst_iter"].dtype == np.uint8


def test_the_reference_runs_agree_and_differ_from_brgemm(cases):
    """AVX2 and AVX512_CORE both ran oneDNN's `ref` RNN and agree on every code; the VNNI
    brgemm run differs on part of them (the ISA-dependent accumulation to emulate)."""
    runs = {}
    for case in cases:
        key = (case.op, case.id.rsplit("/", 1)[1])
        runs.setdefault(key, {})[case.attrs["isa"]] = case.expected["dst_layer"]
    differ = 0
    for by_isa in runs.values():
        assert np.array_equal(by_isa["avx2"], by_isa["avx512_core"])
        differ += int(np.count_nonzero(by_isa["avx2"] != by_isa["avx512_core_vnni"]))
    assert differ > 0
