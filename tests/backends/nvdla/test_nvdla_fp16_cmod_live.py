"""NVIDIA's cmod SDP, live: fresh FP16 vectors (another seed than the shared ones) from
tools/make_nvdla_fp16_vectors.py pass the emulation. Skipped without g++ or the nvdla/hw
sources (``QUANTEMU_NVDLA_HW``: a checkout or mirror of https://github.com/nvdla/hw)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from quantemu.conformance import collect_files, run_suite

pytestmark = pytest.mark.peer
TOOL = Path(__file__).resolve().parents[3] / "tools" / "make_nvdla_fp16_vectors.py"


def _tool():
    spec = importlib.util.spec_from_file_location("make_nvdla_fp16_vectors", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_fresh_cmod_fp16_vectors_pass(tmp_path):
    tool = _tool()
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build NVIDIA's cmod SDP")
    hw = tool.default_hw()
    if not Path(hw).exists():
        pytest.skip(f"no nvdla/hw sources at {hw} (set QUANTEMU_NVDLA_HW)")
    try:
        assert tool.main(["--seed", "7", "--cases", "40", "--out", str(tmp_path)]) == 0
    except SystemExit as exc:  # the tool's own message, e.g. a mirror without the commit
        pytest.skip(f"the cmod could not be built here: {exc}")
    totals = run_suite(collect_files([tmp_path])).totals()
    assert totals.total == 40 and totals.passed == 40
