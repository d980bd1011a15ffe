"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED against the scalar reference, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import conv, reference
from quantemu.backends.tflite.params import (
    ConvParams,
    MultiplierRounding,
    TfliteRuntime,
    conv_params,
    fully_connected_params,
)
from quantemu.errors import InvalidInputError
from tests.backends.tflite.strategies import activations, codes, scales, zero_points


@st.composite
def conv_case(draw, depthwise: bool):
    n, c, h, w = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 3)),
        draw(st.integers(1, 6)),
        draw(st.integers(1, 6)),
    )
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dils = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    if (
        h + pads[0] + pads[2] < (kh - 1) * dils[0] + 1
        or w + pads[1] + pads[3] < (kw - 1) * dils[1] + 1
    ):
        pads = (pads[0], pads[1], pads[2] + (kh - 1) * dils[0], pads[3] + (kw - 1) * dils[1])
    mult = draw(st.integers(1, 2)) if depthwise else 1
    n_out = c * mult if depthwise else draw(st.integers(1, 4))
    x = draw(codes((n, c, h, w)))
    wts = draw(codes((n_out, 1 if depthwise else c, kh, kw)))
    bias = draw(st.none() | st.just(np.arange(n_out) * draw(st.integers(-(2**20), 2**20))))
    s_w = [draw(scales(2.0**-10, 2.0**-4)) for _ in range(n_out)]
    p = conv_params(
        draw(scales()), draw(zero_points), s_w, draw(scales()), draw(zero_points), draw(activations)
    )
    return x, wts, bias, p, {"strides": strides, "dilations": dils, "pads": pads}


@given(conv_case(False))
def test_conv2d_matches_reference(case):
    x, w, b, p, geo = case
    y, counters = conv.conv2d(x, w, b, p, **geo)
    assert np.array_equal(y, reference.conv2d(x, w, b, p, **geo))
    assert set(counters) == {"output_saturated", "activation_clamped"}


@given(conv_case(True))
def test_depthwise_matches_reference(case):
    x, w, b, p, geo = case
    y, _ = conv.depthwise_conv2d(x, w, b, p, **geo)
    assert np.array_equal(y, reference.depthwise_conv2d(x, w, b, p, **geo))


@given(st.data(), st.booleans(), st.booleans(), st.sampled_from(list(TfliteRuntime)))
def test_fully_connected_matches_reference(data, per_channel, with_bias, runtime):
    rows, n_in, n_out = (
        data.draw(st.integers(1, 3)),
        data.draw(st.integers(1, 40)),
        data.draw(st.integers(1, 5)),
    )
    x, w = data.draw(codes((rows, n_in))), data.draw(codes((n_out, n_in)))
    bias = np.arange(n_out) * 1000 - 2000 if with_bias else None
    s_w = [data.draw(scales(2.0**-10, 2.0**-4)) for _ in range(n_out if per_channel else 1)]
    p = fully_connected_params(
        data.draw(scales()),
        data.draw(zero_points),
        s_w,
        data.draw(scales()),
        data.draw(zero_points),
    )
    y, _ = conv.fully_connected(x, w, bias, p)
    assert np.array_equal(y, reference.fully_connected(x, w, bias, p))


def test_conv2d_hand_example():
    # z_in = -1: acc = (1+1) + (3+1) + (5+1) + (7+1) = 20; s_in*s_w/s_out = 1/8 = (2**30, -2):
    # SRDHM(20, 2**30) = 10, then 10 / 4 = 2.5 -> 3 (ties away from zero).
    p = conv_params(0.5, -1, [0.25], 1.0, 0)
    x = np.array([[[[1, 3], [5, 7]]]], np.int8)
    y, _ = conv.conv2d(x, np.ones((1, 1, 2, 2), np.int8), None, p)
    assert y.tolist() == [[[[3]]]]


def test_counters_tell_saturation_from_activation():
    # z_out = 100 with RELU: act_min = 100; a big positive sum saturates at 127 (saturated),
    # a negative one lands below 100 (activation).
    from quantemu.backends.tflite.params import FusedActivation

    p = conv_params(1.0, 0, [1.0], 1.0, 100, FusedActivation.RELU)
    x = np.array([[[[100, -100]]]], np.int8)
    y, c = conv.conv2d(x, np.ones((1, 1, 1, 1), np.int8), None, p)
    assert y.tolist() == [[[[127, 100]]]]
    assert c == {"output_saturated": 1, "activation_clamped": 1}


def test_conv2d_rejects_channel_mismatch():
    p = conv_params(1.0, 0, [1.0], 1.0, 0)
    with pytest.raises(InvalidInputError, match="channels"):
        conv.conv2d(np.zeros((1, 2, 3, 3), np.int8), np.zeros((1, 3, 1, 1), np.int8), None, p)


def test_fully_connected_rounds_once_in_litert_twice_in_micro():
    # A case seen in LiteRT BUILTIN_REF vs TFLite-Micro: acc = -8715, m = 1734730120, s = -8,
    # acc * m * 2**-39 = -27.4998. Double: SRDHM gives -7040 (-7039.95 rounded), then
    # -7040 / 256 = -27.5 -> -28 (away). Single: -27.4998 -> -27.
    x, w = np.array([[-87]], np.int8), np.array([[100]], np.int8)
    bias = np.array([-15])  # -87 * 100 - 15 = -8715
    got = {}
    for rounding in MultiplierRounding:
        p = ConvParams(0, 0, (1734730120,), (-8,), rounding=rounding)
        got[rounding] = conv.fully_connected(x, w, bias, p)[0].item()
        assert got[rounding] == reference.fully_connected(x, w, bias, p).item()
    assert got == {MultiplierRounding.DOUBLE: -28, MultiplierRounding.SINGLE_HALF_UP: -27}
    micro = fully_connected_params(0.5, 0, [0.25], 0.5, 0, runtime=TfliteRuntime.TFLITE_MICRO)
    assert micro.rounding is MultiplierRounding.DOUBLE
