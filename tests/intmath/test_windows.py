"""Sliding windows against the naive index-arithmetic reference, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import reference
from quantemu.intmath.windows import sliding_windows, window_columns


@st.composite
def geometries(draw):
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = tuple(draw(st.integers(-2, 3)) for _ in range(4))
    pads = (
        max(pads[0], -(h - 1)),
        max(pads[1], -(w - 1)),
        max(pads[2], -(h - 1 + min(pads[0], 0))),
        max(pads[3], -(w - 1 + min(pads[1], 0))),
    )  # crops leave at least one row and column
    return (h, w), kernel, strides, dilations, pads


@given(geo=geometries(), pad_value=st.integers(-128, 127), lead=st.sampled_from([(), (2,), (2, 3)]))
def test_matches_reference(geo, pad_value, lead):
    (h, w), kernel, strides, dilations, pads = geo
    x = np.arange(int(np.prod(lead, dtype=int)) * h * w, dtype=np.int64).reshape(*lead, h, w) - 50
    kw = {"strides": strides, "dilations": dilations, "pads": pads, "pad_value": pad_value}
    got = sliding_windows(x, kernel, **kw)
    for idx in np.ndindex(*lead):
        want = reference.sliding_windows(x[idx].tolist(), kernel, **kw)
        assert got[idx].tolist() == want or (got[idx].size == 0 and not want)


@given(geo=geometries())
def test_other_axes_and_dtype(geo):
    """Windows over the middle axes of an NHWC array, converted in the padding copy."""
    (h, w), kernel, strides, dilations, pads = geo
    x = np.arange(2 * h * w * 3, dtype=np.int8).reshape(2, h, w, 3)
    kw = {"strides": strides, "dilations": dilations, "pads": pads, "pad_value": 9}
    got = sliding_windows(x, kernel, axes=(1, 2), dtype=np.float32, **kw)
    assert got.dtype == np.float32
    for n in range(2):
        for c in range(3):
            want = reference.sliding_windows(x[n, :, :, c].tolist(), kernel, **kw)
            assert got[n, :, :, c].tolist() == want or (got[n, :, :, c].size == 0 and not want)


def test_view_without_padding():
    x = np.arange(16).reshape(4, 4)
    v = sliding_windows(x, 2, strides=2)
    assert np.shares_memory(v, x) and not v.flags.writeable
    assert v.shape == (2, 2, 2, 2)


@pytest.mark.parametrize("bad", [{"strides": 0}, {"dilations": (1, 2, 3)}, {"pads": (1, 1)}])
def test_errors(bad):
    with pytest.raises(InvalidInputError, match="sliding_windows"):
        sliding_windows(np.zeros((3, 3)), 2, **bad)


@given(geo=geometries(), pad_value=st.integers(-128, 127), n=st.integers(1, 2), c=st.integers(1, 3))
def test_window_columns_match_reference(geo, pad_value, n, c):
    """The per-tap column copy holds, at [n, c, r, s, oh, ow], the reference's window value."""
    (h, w), kernel, strides, dilations, pads = geo
    x = np.arange(n * c * h * w, dtype=np.int64).reshape(n, c, h, w) - 50
    kw = {"strides": strides, "dilations": dilations, "pads": pads, "pad_value": pad_value}
    got = window_columns(x, kernel, **kw)
    assert got.flags.c_contiguous and got.dtype == x.dtype
    for i in range(n):
        for j in range(c):
            want = reference.sliding_windows(x[i, j].tolist(), kernel, **kw)
            ours = got[i, j].transpose(2, 3, 0, 1)  # (OH, OW, kh, kw), as the reference
            assert ours.tolist() == want or (ours.size == 0 and not want)


def test_window_columns_errors():
    with pytest.raises(InvalidInputError, match="window_columns"):
        window_columns(np.zeros((3, 3)), 2)
    with pytest.raises(InvalidInputError, match="window_columns: kernel"):
        window_columns(np.zeros((1, 1, 3, 3)), 0)
