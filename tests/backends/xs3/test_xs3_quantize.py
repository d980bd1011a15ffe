"""Parameter derivation (XMOS converter rules) and the pipeline error report."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends import xs3
from quantemu.backends.xs3 import (
    ConvParams,
    OutputOptions,
    Window,
    YParams,
    derive_bso,
    layer_error,
    pipeline_error,
    split_multiplier,
)
from quantemu.errors import InvalidInputError


def _example(z_out=3, **over):
    # Channel 0: s_w = 0.25 -> M = 0.5*0.25/1.0 = 0.125 = 2^-3.
    #   rshift = -ceil(-3) + 1 = 4; scale = round(2^14 * 0.125 * 16) = 2^15 -> fix-up:
    #   rshift 3, scale 16384. Headroom: rshift = -4 -> shift1 = 0, shift2 = 21 - 4 = 17.
    #   raw = 3 * 2^17 = 393216; offset_scale = round(sqrt(393216) = 627.06) = 627;
    #   offset = round(393216 / 627 = 627.14) = 627.
    #   bias: round(1.0 / (0.5*0.25)) = 8; weights sum 1-2+3+4 = 6; 8 - (-5)*6 = 38.
    # Channel 1: s_w = 0.3 -> M = 0.15, log2 = -2.74: rshift 3, scale = round(16384*1.2 =
    #   19660.8) = 19661; headroom -4 -> shift1 0, shift2 17; same offset.
    #   bias: -0.15 / 0.15 = -1 -> -1; weights sum -4; -1 - (-5)*(-4) = -21.
    kwargs = dict(
        input_scale=0.5,
        input_zero_point=-5,
        weight_scales=[0.25, 0.3],
        output_scale=1.0,
        output_zero_point=z_out,
        weights=np.array([[1, -2, 3, 4], [-1, -1, -1, -1]], dtype=np.int8),
        bias=np.array([1.0, -0.15]),
    )
    kwargs.update(over)
    return derive_bso(**kwargs)


def test_derivation_by_hand():
    d = _example()
    ch = d.channels
    assert ch.scale.tolist() == [16384, 19661]
    assert ch.shift1.tolist() == [0, 0]
    assert ch.shift2.tolist() == [17, 17]
    assert ch.offset_scale.tolist() == [627, 627]
    assert ch.offset.tolist() == [627, 627]
    assert ch.bias.tolist() == [38, -21]
    assert not d.bias_clipped.any()
    bso = d.bso()
    assert bso.shape == (1, 7, 16) and bso[0, :, 0].tolist() == [0, 38, 0, 16384, 627, 627, 17]


def test_small_multiplier_uses_shift1():
    # M = 0.02*0.001/0.05 = 0.0004: log2 = -11.29, rshift = 12, scale = round(16384 * 1.6384 =
    # 26843.55) = 26844; headroom 12 - 7 = 5 -> shift1 5, shift2 21.
    assert split_multiplier([0.0004])[1].tolist() == [26844]
    d = derive_bso(
        input_scale=0.02,
        input_zero_point=0,
        weight_scales=0.001,
        output_scale=0.05,
        output_zero_point=0,
        weights=np.ones((4, 3), dtype=np.int8),
    )
    assert (d.channels.shift1.tolist(), d.channels.shift2.tolist()) == ([5] * 4, [21] * 4)
    # z_out = 0: raw = 0, so offset_scale = offset = 0.
    assert d.channels.offset_scale.tolist() == [0] * 4 and d.channels.offset.tolist() == [0] * 4


def test_negative_zero_point_and_int_bias_and_depthwise_axis():
    # z_out = -7, shift2 17: raw = -917504; offset_scale = round(957.86) = 958 (positive),
    # offset = round(-917504/958 = -957.73) = -958: the product carries raw's sign.
    # An int bias is taken as the TFLite int32 bias. Depthwise weights (K_h, K_w, C): axis -1.
    w = np.array([[[1, 2, 3, 4]]], dtype=np.int8)  # one tap, four channels
    d = _example(
        z_out=-7, weights=w, channel_axis=-1, weight_scales=0.25, bias=np.array([10, 0, 0, 0])
    )
    assert d.channels.offset_scale.tolist() == [958] * 4
    assert d.channels.offset.tolist() == [-958] * 4
    assert d.channels.bias.tolist() == [15, 10, 15, 20]  # b + 5*w


def test_bias_clipped_to_int32():
    d = _example(bias=np.array([1e12, -1e12]))
    assert d.channels.bias.tolist() == [2**31 - 1, -(2**31)]
    assert d.bias_clipped.tolist() == [True, True]


@pytest.mark.parametrize(
    "over, match",
    [
        ({"weight_scales": [0.25, 0.0]}, r"weight_scales must be finite and > 0, got 0.0"),
        ({"output_scale": float("nan")}, r"output_scale must be finite and > 0"),
        ({"output_zero_point": 200}, r"output_zero_point = 200 is outside \[-128, 127\]"),
        ({"output_bits": 12}, r"output_bits = 12, use 8 or 16"),
        ({"weights": np.zeros((2, 4), dtype=np.int16)}, r"weights must be int8, got int16"),
        # M = 0.5*1e6/1 = 5e5: rshift = -19+1-7 = -25 -> shift2 = 21 - 25 = -4.
        ({"weight_scales": 1e6}, r"channel 0: shift2 = -4 is outside 0..31 \(M is too large"),
        # M = 0.5*1e-12 = 5e-13: log2 M = -40.9, rshift = 40+1-7 = 34 -> shift1 = 34.
        ({"weight_scales": 1e-12}, r"channel 0: shift1 = 34 is outside 0..31 \(M is too small"),
    ],
)
def test_derivation_errors(over, match):
    with pytest.raises(InvalidInputError, match=match):
        _example(**over)


def test_pipeline_error_by_hand():
    # Channel 0 (M = 1/8, z_out 3): a2 = 16384*acc + 627*627 = 16384*acc + 393129, so
    # y = floor(acc/8 + 393129/2^17 + 1/2) = floor(acc/8 + 3.49934). The ideal round(acc/8) + 3
    # rounds ties away from zero. Over acc in [-16, 15] they differ only at the positive ties
    # acc = 4 (3 vs 4) and 12 (4 vs 5): 2 of 32 off by one. (Negative ties agree: acc = -4 gives
    # floor(2.999) = 2 and round(-0.5) + 3 = 2.)
    d = _example()
    acc = np.stack([np.arange(-16, 16), np.zeros(32, dtype=np.int64)], axis=1)
    rep = pipeline_error(d, acc)
    assert rep.per_channel_max == (1, 0)
    assert (rep.max_abs_error, rep.count) == (1, 64)
    assert rep.fraction_off == 2 / 64


def _padded_bso(d):
    """The two derived channels plus two idle ones (conv C_out must be a multiple of 4)."""
    return xs3.pack_bso(**{name: np.r_[f, 0, 0] for name, f in d.channels.fields().items()})


def test_pipeline_error_matches_the_operator():
    # The report's integer side is exactly what conv2d_1x1 outputs for those accumulators.
    d = _example()
    x = np.zeros((1, 1, 4), dtype=np.int8)
    y = xs3.conv2d_1x1(x, np.zeros((4, 4), dtype=np.int8), _padded_bso(d))
    ideal = np.round(d.channels.bias * d.multiplier) + 3  # 38/8 = 4.75 -> 5 + 3; -21*0.15 -> -3
    assert y.y.ravel()[:2].tolist() == ideal.astype(int).tolist() == [8, 0]


def test_layer_error_over_the_layer_range():
    # Over the whole reachable accumulator range the derived pipeline stays within one LSB of
    # the float ideal, and misses it on only a small fraction of outputs.
    d = _example()
    w = np.array([[1, -2, 3, 4], [-1, -1, -1, -1]], dtype=np.int8)
    lo, hi = xs3.accumulator_range(d, w)
    assert lo.tolist() == [38 - 128 * 8 - 127 * 2, -21 - 127 * 4]
    assert hi.tolist() == [38 + 127 * 8 + 128 * 2, -21 + 128 * 4]
    rep = layer_error(d, w, samples=2000, op="conv2d_deep")
    assert rep.max_abs_error == 1
    assert 0 < rep.fraction_off < 0.05


def test_derived_parameters_run_through_conv2d_deep():
    d = _example()
    x = np.arange(-8, 8, dtype=np.int8).reshape(2, 2, 4)
    k = np.zeros((4, 1, 1, 4), dtype=np.int8)
    k[:2, 0, 0] = [[1, -2, 3, 4], [-1, -1, -1, -1]]
    bso = _padded_bso(d)
    params = ConvParams(-5, Window(1, 1), YParams(2, 2, 4), OutputOptions())
    r = xs3.conv2d_deep(x, k, bso, params)
    # float ideal: y = round(M * (sum w*(x - z_in) + b)) + 3; within one LSB everywhere.
    xf = x.astype(float) + 5
    acc = np.einsum("hwc,kc->hwk", xf, k[:2, 0, 0]) + np.array([8, -1])
    ideal = np.round(acc * d.multiplier) + 3
    assert np.abs(r.y[..., :2] - ideal).max() <= 1


def test_error_report_argument_errors():
    d = _example()
    with pytest.raises(InvalidInputError, match=r"pipeline_error: op = 'conv3d'; use one of"):
        pipeline_error(d, np.zeros((1, 2)), op="conv3d")
    with pytest.raises(InvalidInputError, match=r"acc has shape \(3,\), expected \(N, 2\)"):
        pipeline_error(d, np.zeros(3))
