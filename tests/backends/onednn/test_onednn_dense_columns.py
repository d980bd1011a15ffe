"""``dense_columns`` (one strided slice per kernel tap, the int8 engine's transposed layout)
holds the same windows as ``_dense_windows`` (the reference im2col) for every geometry."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn.im2col import _dense_windows, dense_columns
from quantemu.backends.onednn.params import ConvGeometry


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 2),
    groups=st.sampled_from([1, 2]),
    cg=st.integers(1, 3),
    hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    seed=st.integers(0, 2**16),
)
def test_dense_columns_equal_the_reference_windows(  # noqa: PLR0917 (hypothesis draws)
    n, groups, cg, hw, kernel, strides, dilations, pads, seed
):
    geometry = ConvGeometry(strides=strides, pads=pads, dilations=dilations, groups=groups)
    h, w = hw
    span_h = (kernel[0] - 1) * dilations[0] + 1
    span_w = (kernel[1] - 1) * dilations[1] + 1
    if h + pads[0] + pads[2] < span_h or w + pads[1] + pads[3] < span_w:
        return  # the window does not fit: no output
    out_hw = geometry.output_size(h, w, *kernel)
    x = np.random.default_rng(seed).integers(-128, 128, (n, groups * cg, h, w), dtype=np.int8)
    got = dense_columns(x, geometry, kernel, out_hw)
    want = _dense_windows(x, geometry, kernel, out_hw)
    assert got.shape == want.shape
    assert np.array_equal(got, want)
