"""The bundled xs3 conformance vectors (XMOS's x86 reference) all pass, bit for bit."""

from __future__ import annotations

from collections import Counter

import pytest

from quantemu.conformance.reader import collect_tree
from quantemu.conformance.runner import Status, run_suite
from quantemu.conformance.suite import bundled_root

OPS = {
    "conv2d_deep",
    "conv2d_shallowin",
    "conv2d_1x1",
    "conv2d_depthwise",
    "fully_connected_8",
    "fully_connected_16",
    "fc_deepin_shallowout_16",
    "fc_deepin_shallowout_8",
}


def test_bundled_xs3_vectors_pass():
    root = bundled_root() / "xs3"
    if not root.is_dir():
        pytest.skip("the bundled xs3 vectors are missing (run tools/sync_vectors.py)")
    result = run_suite(collect_tree(root, "<bundled>/xs3/"))
    bad = [
        (r.id, r.status.value, r.reason) for r in result.results if r.status is not Status.PASSED
    ]
    assert not bad, bad[:5]
    per_op = Counter(r.op for r in result.results)
    assert set(per_op) == OPS
