"""The public nvdla conformance vectors pass through the registry, every case."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantemu.backends.nvdla import SdpRegisters
from quantemu.backends.registry import lookup
from quantemu.conformance.reader import collect_files
from quantemu.conformance.runner import Status, run_suite
from quantemu.conformance.suite import BUNDLED_PREFIX, bundled_files

PAGE_COUNTS = {"sdp": 118, "cdp": 100, "pdp_avg": 87, "pdp_max": 60, "pdp_min": 60, "cacc": 79}
SHARED = Path(__file__).resolve().parents[4] / "shared" / "conformance" / "nvdla"


def _check(files):
    result = run_suite(files)
    bad = [r for r in result.results if r.status is not Status.PASSED]
    assert not bad, bad[:3]
    counts = {s.op: s.passed for s in result.by_op()}
    assert counts == PAGE_COUNTS


def test_bundled_nvdla_vectors_all_pass():
    _check([vf for vf in bundled_files() if vf.display.startswith(BUNDLED_PREFIX + "nvdla/")])


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared conformance suite not checked out")
def test_shared_nvdla_vectors_all_pass():
    _check(collect_files([SHARED]))


def test_registered_attributes_are_exactly_the_register_fields():
    assert lookup("nvdla", "sdp").attrs == frozenset(SdpRegisters.widths())
    assert len(lookup("nvdla", "sdp").attrs) == 67
    assert lookup("nvdla", "cacc").attrs == {"PROC_PRECISION", "CLIP_TRUNCATE"}
