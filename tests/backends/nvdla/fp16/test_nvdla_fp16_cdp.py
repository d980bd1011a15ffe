"""CDP (LRN) in FP16: the vectorised datapath against its scalar twin, the cmod-generated vectors
(tests/data/nvdla_cdp_fp16, seed 0), errors, and a live regeneration from NVIDIA's cmod."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backends.nvdla.cmod_tools import cmod_tool

from quantemu.backends.nvdla.cdp import cdp, cdp_window
from quantemu.backends.nvdla.fp16 import reference as ref
from quantemu.backends.nvdla.fp16.cdp import cdp_window_fp16
from quantemu.backends.nvdla.registers import CdpRegisters
from quantemu.conformance import collect_files, run_suite
from quantemu.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "tests" / "data" / "nvdla_cdp_fp16"
EDGE = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00,
        0x7C01, 0xFE11, 0x3C00, 0xBC00, 0x3555, 0x5640]  # fmt: skip
F32_EDGE = [0, 0x80000000, 0x3F800000, 0x3A83126F, 0x41200000, 0xC1200000, 0x7F7FFFFF,
            0x7F800000, 0x7FC00000, 0x00000001, 0x4B000000]  # fmt: skip

words16 = st.one_of(st.sampled_from(EDGE), st.integers(0, 0xFFFF))
words32 = st.one_of(st.sampled_from(F32_EDGE), st.integers(0, 0xFFFFFFFF))
u8 = st.one_of(st.sampled_from([0, 1, 4, 8, 0x7F, 0x80, 0x81, 0xF0, 0xFF]), st.integers(0, 255))


@st.composite
def cases(draw):
    n = 4 * draw(st.integers(1, 3)) + 8
    x = draw(st.lists(words16, min_size=n, max_size=n))
    le = draw(st.lists(words16, min_size=65, max_size=65))
    lo = draw(st.lists(words16, min_size=257, max_size=257))
    regs = CdpRegisters(
        INPUT_DATA_TYPE=2,
        NORMALZ_LEN=draw(st.integers(0, 3)),
        SQSUM_BYPASS=draw(st.integers(0, 1)),
        MUL_BYPASS=draw(st.integers(0, 1)),
        LUT_LE_FUNCTION=draw(st.integers(0, 1)),
        LUT_UFLOW_PRIORITY=draw(st.integers(0, 1)),
        LUT_OFLOW_PRIORITY=draw(st.integers(0, 1)),
        LUT_HYBRID_PRIORITY=draw(st.integers(0, 1)),
        LUT_LE_INDEX_OFFSET=draw(u8),
        LUT_LE_INDEX_SELECT=draw(u8),
        LUT_LO_INDEX_SELECT=draw(u8),
        LUT_LE_START_LOW=draw(words32),
        LUT_LE_END_LOW=draw(words32),
        LUT_LO_START_LOW=draw(words32),
        LUT_LO_END_LOW=draw(words32),
        LUT_LE_SLOPE_UFLOW_SCALE=draw(words16),
        LUT_LE_SLOPE_OFLOW_SCALE=draw(words16),
        LUT_LO_SLOPE_UFLOW_SCALE=draw(words16),
        LUT_LO_SLOPE_OFLOW_SCALE=draw(words16),
    )
    return x, regs, le, lo


@settings(max_examples=150, deadline=None)
@given(cases())
def test_vectorised_equals_scalar_reference(case):
    x, regs, le, lo = case
    got = cdp_window(np.array(x, np.uint16), regs, np.array(le, np.uint16), np.array(lo, np.uint16))
    want_y, want_counters = ref.cdp_window_fp16(x, regs, le, lo)
    assert got.y.dtype == np.int16
    assert got.y.view(np.uint16).tolist() == want_y
    assert got.counters() == want_counters


def test_float16_and_int16_words_agree_and_pixels_are_independent():
    rng = np.random.default_rng(0)
    regs = CdpRegisters(INPUT_DATA_TYPE=2, NORMALZ_LEN=3, LUT_LO_INDEX_SELECT=0xFC)
    x = (rng.standard_normal((3, 16)) * 3).astype(np.float16)
    le = np.linspace(1, 0, 65).astype(np.float16)
    lo = np.linspace(1, 0.5, 257).astype(np.float16)
    a = cdp_window(x, regs, le, lo)
    b = cdp_window(x.view(np.int16), regs, le.view(np.int16), lo.view(np.uint16))
    assert a.y.tolist() == b.y.tolist() and a.counters() == b.counters()
    row = cdp_window(x[1], regs, le, lo)
    assert row.y.tolist() == a.y[1].tolist()
    cols = cdp_window(x.T, regs, le, lo, axis=0)
    assert cols.y.T.tolist() == a.y.tolist()


def test_cube_fills_edges_with_plus_zero():
    rng = np.random.default_rng(1)
    regs = CdpRegisters(INPUT_DATA_TYPE=2, NORMALZ_LEN=2, LUT_LO_INDEX_SELECT=0xFE)
    x = (rng.standard_normal((8, 2, 3)) * 2).astype(np.float16)
    le, lo = np.full(65, 0.5, np.float16), np.linspace(1, 0, 257).astype(np.float16)
    got = cdp(x, regs, le, lo)
    padded = np.pad(np.moveaxis(x, 0, -1), [(0, 0), (0, 0), (4, 4)])
    want = cdp_window(padded, regs, le, lo)
    assert np.moveaxis(got.y, 0, -1).tolist() == want.y.tolist()
    assert got.counters() == want.counters()


def test_errors():
    regs = CdpRegisters(INPUT_DATA_TYPE=2)
    le, lo = np.zeros(65, np.float16), np.zeros(257, np.float16)
    with pytest.raises(InvalidInputError, match="float16"):
        cdp_window(np.zeros(12, np.float32), regs, le, lo)
    with pytest.raises(InvalidInputError, match="C \\+ 8"):
        cdp_window(np.zeros(8, np.float16), regs, le, lo)
    with pytest.raises(InvalidInputError, match="LUT_LO must have shape"):
        cdp_window_fp16(np.zeros(12, np.float16), regs, le, lo[:256])
    with pytest.raises(InvalidInputError, match="reserved"):
        CdpRegisters(INPUT_DATA_TYPE=3)


def test_the_committed_cmod_vectors_all_pass():
    totals = run_suite(collect_files([DATA])).totals()
    assert totals.total >= 60 and totals.passed == totals.total


@pytest.mark.peer
def test_fresh_cmod_cdp_fp16_vectors_pass(tmp_path):
    tool = cmod_tool("make_nvdla_cdp_fp16_vectors", "CDP")
    if tool.main(["--seed", "5", "--cases", "30", "--out", str(tmp_path)]) != 0:
        pytest.skip("the cmod could not be built here (see the tool's message)")
    totals = run_suite(collect_files([tmp_path])).totals()
    assert totals.total == 30 and totals.passed == 30
