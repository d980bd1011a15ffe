"""The vectorised nvdla ops equal the naive page pseudo-code (``nvdla.reference``), with ``==``.

Register sets are drawn raw over each field's full range (unused fields random, as in the
vectors), including encodings the page leaves undefined in the cmod (SDP exponent offsets >= 32,
CDP selects outside -24..30): there both sides evaluate the page's formulas on unbounded
integers, which is what the backend documents.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from nvdla_strategies import cacc_cases, cdp_cases, pdp_cases, sdp_cases

from quantemu.backends.nvdla import (
    CaccRegisters,
    CdpRegisters,
    PdpRegisters,
    SdpRegisters,
    cacc,
    cdp_window,
    pdp,
    sdp,
)
from quantemu.backends.nvdla import reference as ref
from quantemu.backends.nvdla.operands import OPERANDS

FEW = settings(max_examples=60, deadline=None)


@FEW
@given(case=sdp_cases())
def test_sdp_matches_reference(case):
    attrs, inputs = case
    expected = ref.sdp(attrs, inputs)
    arrays = {k: np.array(v, dtype=np.int32 if k == "X" else np.int16) for k, v in inputs.items()}
    r = sdp(
        arrays["X"],
        SdpRegisters.from_fields(attrs, complete=True),
        operands={n: arrays[n] for n in OPERANDS if n in arrays},
        lut_le=arrays["LUT_LE"],
        lut_lo=arrays["LUT_LO"],
    )
    assert r.y.dtype == np.int16
    assert r.y.tolist() == expected.pop("Y")
    assert r.counters() == expected


@FEW
@given(case=cdp_cases())
def test_cdp_matches_reference(case):
    attrs, inputs = case
    expected = ref.cdp(attrs, inputs)
    dtype = np.int8 if attrs["INPUT_DATA_TYPE"] == 0 else np.int16
    r = cdp_window(
        np.array(inputs["X"], dtype=dtype),
        CdpRegisters.from_fields(attrs, complete=True),
        np.array(inputs["LUT_LE"], dtype=np.int16),
        np.array(inputs["LUT_LO"], dtype=np.int16),
    )
    assert r.y.dtype == dtype
    assert r.y.tolist() == expected.pop("Y")
    assert r.counters() == expected


@FEW
@given(case=pdp_cases())
def test_pdp_matches_reference(case):
    attrs, x = case
    y = pdp(x, PdpRegisters.from_fields(attrs, complete=True))
    assert y.dtype == x.dtype
    assert y.tolist() == ref.pdp(attrs, x.tolist())


@FEW
@given(case=cacc_cases())
def test_cacc_matches_reference(case):
    attrs, p = case
    r = cacc(p, CaccRegisters.from_fields(attrs, complete=True))
    y, count = ref.cacc(attrs, p.tolist())
    assert r.y.dtype == np.int32
    assert r.y.tolist() == y
    assert count == r.SAT_COUNT
