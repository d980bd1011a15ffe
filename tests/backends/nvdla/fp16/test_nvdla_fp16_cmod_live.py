"""NVIDIA's cmod SDP, live: fresh FP16 vectors (another seed than the shared ones) from
tools/make_nvdla_fp16_vectors.py pass the emulation. Skipped without g++ or the nvdla/hw
sources (``QUANTEMU_NVDLA_HW``: a checkout or mirror of https://github.com/nvdla/hw)."""

from __future__ import annotations

import pytest
from tests.backends.nvdla.cmod_tools import cmod_tool

from quantemu.conformance import collect_files, run_suite

pytestmark = pytest.mark.peer


def test_fresh_cmod_fp16_vectors_pass(tmp_path):
    tool = cmod_tool("make_nvdla_fp16_vectors", "SDP")
    try:
        assert tool.main(["--seed", "7", "--cases", "40", "--out", str(tmp_path)]) == 0
    except SystemExit as exc:  # the tool's own message, e.g. a mirror without the commit
        pytest.skip(f"the cmod could not be built here: {exc}")
    totals = run_suite(collect_files([tmp_path])).totals()
    assert totals.total == 40 and totals.passed == 40
