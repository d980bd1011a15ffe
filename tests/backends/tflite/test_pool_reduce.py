"""MAX/AVERAGE_POOL_2D and MEAN against the scalar reference, with ==."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import pool, reduce, reference
from quantemu.backends.tflite.params import mean_params, pool_params
from tests.backends.tflite.strategies import activations, codes, scales, zero_points


@st.composite
def pool_case(draw):
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, min(h, 3) + 1)), draw(st.integers(1, min(w, 3) + 1))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    # TFLite's SAME padding: pads below the kernel size, so every window meets the image.
    pads = (
        draw(st.integers(0, kh - 1)),
        draw(st.integers(0, kw - 1)),
        draw(st.integers(0, kh - 1)),
        draw(st.integers(0, kw - 1)),
    )
    if h + pads[0] + pads[2] < kh or w + pads[1] + pads[3] < kw:
        pads = (0, 0, kh - 1, kw - 1)
    x = draw(codes((draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w)))
    p = pool_params(draw(scales()), draw(zero_points), draw(activations))
    return x, (kh, kw), p, {"strides": strides, "pads": pads}


@given(pool_case())
def test_max_pool_matches_reference(case):
    x, k, p, geo = case
    assert np.array_equal(pool.max_pool2d(x, k, p, **geo)[0], reference.max_pool2d(x, k, p, **geo))


@given(pool_case())
def test_average_pool_matches_reference(case):
    x, k, p, geo = case
    assert np.array_equal(
        pool.average_pool2d(x, k, p, **geo)[0], reference.average_pool2d(x, k, p, **geo)
    )


def test_average_pool_rounds_half_away_over_in_image_taps():
    # Corner window with pads (1, 1, 0, 0) sees one tap (-3): -3/1; the next sees -3, 2: -1/2
    # -> (-1 - 1) / 2 = -1 (C truncation of -1): half away from zero.
    x = np.array([[[[-3, 2]]]], np.int8)
    y, _ = pool.average_pool2d(x, (2, 2), pool_params(1.0, 0), pads=(1, 1, 0, 0))
    assert y.tolist() == [[[[-3, -1]]]]


@st.composite
def mean_case(draw):
    shape = tuple(draw(st.integers(1, 5)) for _ in range(4))
    axes = draw(st.sets(st.integers(0, 3), min_size=1, max_size=3))
    si, so = draw(scales()), draw(scales())
    if draw(st.booleans()):
        so = si  # equal quantization: a path older TFLite special-cased
    return (
        draw(codes(shape)),
        tuple(axes),
        draw(st.booleans()),
        mean_params(si, draw(zero_points), so, draw(zero_points)),
    )


@given(mean_case())
def test_mean_matches_reference(case):
    x, axes, keepdims, p = case
    y, _ = reduce.mean(x, axes, keepdims, p)
    assert np.array_equal(y, reference.mean(x, axes, keepdims, p))


def test_mean_rescaled_multiplier_drops_bits():
    # count 7: k = 2, m' = floor(2**30 * 4 / 7) = 613566756 (7 * 613566756 = 2**32 - 4).
    assert reduce.mean_rescaled_multiplier(1 << 30, 1, 7) == (613566756, -1)
