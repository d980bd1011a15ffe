"""Every public onednn conformance vector passes, through the project's runner.

Runs the bundled copy of the suite, and the shared one (``../shared/conformance/onednn``) when it
sits beside the checkout, so that a regenerated suite is checked before it is bundled.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quantemu.conformance import Status, bundled_files, collect_files, run_suite

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "conformance" / "onednn"
OPS = {
    "matmul",
    "conv2d",
    "quantized_linear",
    "quantized_conv2d",
    "avg_pool2d",
    "max_pool2d",
    "reorder",
}


def _check(files):
    result = run_suite(files)
    bad = [r for r in result.results if r.status is not Status.PASSED]
    assert not bad, "\n".join(f"{r.id}: {r.status.value} {r.reason} {r.mismatches}" for r in bad)
    assert {r.op for r in result.results} == OPS
    return len(result.results)


def test_bundled_onednn_vectors_pass():
    files = [f for f in bundled_files() if "/onednn/" in f.display]
    assert _check(files) >= 350


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared suite at {SHARED}")
def test_shared_onednn_vectors_pass():
    assert _check(collect_files([SHARED])) >= 350
