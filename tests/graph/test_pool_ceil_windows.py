"""Pooling with ``ceil_mode=1`` against onnxruntime over the geometries where the last window
is in question: it may hang over the end, start in the right padding (dropped, as ONNX's
definition and onnxruntime drop it), or start just inside the input.

ONNX's own node case ``test_averagepool_2d_ceil_last_window_starts_on_pad`` writes its expected
values rounded to 4 decimals; here every geometry is checked against onnxruntime's values.
"""

from __future__ import annotations

import itertools

import pytest
from onnx_models import ORT_REASON, assert_matches_ort, single

pytest.importorskip("onnxruntime", reason=ORT_REASON)

SIZES = [(2, 2), (5, 7), (6, 6), (9, 4)]
#: (kernel, stride, pads top/left/bottom/right): the node case's own (3, 3, 1s) among them.
GEOMETRIES = [
    (k, s, pads)
    for k, s in itertools.product([2, 3, 4], [1, 2, 3, 4])
    for p in range(min(k, 3))
    for pads in {(p, p, p, p), (p, 0, 0, p), (0, p, p, 0)}
]


def _valid(size, k, pads) -> bool:
    h, w = size
    return h + pads[0] + pads[2] >= k and w + pads[1] + pads[3] >= k


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ceil_mode_windows_match_onnxruntime(op, size):
    checked = 0
    for (k, s, pads), include in itertools.product(GEOMETRIES, [0, 1]):
        if not _valid(size, k, pads) or (op == "MaxPool" and include):
            continue
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": list(pads), "ceil_mode": 1}
        if op == "AveragePool":
            attrs["count_include_pad"] = include
        assert_matches_ort(*single(op, [(1, 2, *size)], opset=19, **attrs), rtol=1e-6, atol=1e-6)
        checked += 1
    assert checked > 50
