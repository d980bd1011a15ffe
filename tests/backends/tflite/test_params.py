"""TFLite's Prepare-time parameters: multipliers against exact rational arithmetic, activation
ranges, validation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import params as P
from quantemu.backends.tflite.elementwise_params import add_params
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.backends.tflite.strategies import scales


def _exact_quantize_multiplier(m: float) -> tuple[int, int]:
    """``m = q * 2**(e - 31)`` with ``q`` rounded half away from zero, by rational arithmetic."""
    r = Fraction(m)
    e = r.numerator.bit_length() - r.denominator.bit_length()
    while Fraction(2) ** e <= r:
        e += 1
    while Fraction(2) ** (e - 1) > r:
        e -= 1
    t = r * 2 ** (31 - e)  # in [2**30, 2**31)
    q = int(t) + (1 if t - int(t) >= Fraction(1, 2) else 0)
    if q == 2**31:
        q, e = 2**30, e + 1
    return (0, 0) if e < -31 else (q, e)


@given(st.floats(2.0**-40, 2.0**40, allow_nan=False))
def test_quantize_multiplier_is_exact_rounding(m):
    assert P.quantize_multiplier(m) == _exact_quantize_multiplier(m)


def test_quantize_multiplier_edges():
    assert P.quantize_multiplier(0.0) == (0, 0)
    assert P.quantize_multiplier(2.0**-33) == (0, 0)  # frexp shift -32: flushed
    assert P.quantize_multiplier(2.0**-32) == (2**30, -31)
    assert P.quantize_multiplier((2**31 - 0.5) / 2**31) == (2**30, 1)  # rounds up to 2**31
    with pytest.raises(InvalidInputError, match="finite"):
        P.quantize_multiplier(float("inf"))
    with pytest.raises(UnsupportedError, match=r"\(0, 1\)"):
        P.quantize_multiplier_smaller_than_one_exp(1.0)
    with pytest.raises(UnsupportedError, match="above 1"):
        P.quantize_multiplier_greater_than_one(0.5)


@given(scales(2.0**-10, 1.0), st.integers(-128, 127))
def test_activation_ranges_quantize_bounds_in_float32(scale, zp):
    s = np.float32(scale)

    def q(f):  # TFLite's lambda, with round half away done on the exact float32 quotient
        v = float(np.float32(f) / s)
        r = int(abs(v) + 0.5) * (1 if v >= 0 else -1)
        return zp + r

    assert P.activation_range(P.FusedActivation.NONE, scale, zp) == (-128, 127)
    assert P.activation_range(P.FusedActivation.RELU, scale, zp) == (max(-128, zp), 127)
    lo, hi = P.activation_range(P.FusedActivation.RELU6, scale, zp)
    assert (lo, hi) == (max(-128, zp), min(127, q(6.0)))
    lo, hi = P.activation_range(P.FusedActivation.RELU_N1_TO_1, scale, zp)
    assert (lo, hi) == (max(-128, q(-1.0)), min(127, q(1.0)))


def test_conv_params_per_channel_double_arithmetic():
    # s_in * s_w / s_out in double from the float32 values, channel by channel.
    s_in, s_out = np.float32(0.03125), np.float32(0.1)
    s_w = [np.float32(0.002), np.float32(0.0031)]
    p = P.conv_params(s_in, -3, s_w, s_out, 5, P.FusedActivation.RELU)
    expect = [P.quantize_multiplier(float(s_in) * float(w) / float(s_out)) for w in s_w]
    assert list(zip(p.multipliers, p.shifts, strict=True)) == expect
    assert (p.input_offset, p.output_offset, p.act_min, p.act_max) == (3, 5, 5, 127)


def test_fully_connected_per_tensor_multiplies_scales_in_float32():
    s_in, s_w, s_out = np.float32(0.1), np.float32(0.3), np.float32(0.7)
    p = P.fully_connected_params(s_in, 0, [s_w], s_out, 0)
    assert (p.multipliers[0], p.shifts[0]) == P.quantize_multiplier(
        float(s_in * s_w) / float(s_out)
    )


def test_params_validate():
    with pytest.raises(InvalidInputError, match="positive"):
        add_params(0.0, 0, 0.5, 0, 0.5, 0)
    with pytest.raises(InvalidInputError, match="int8 zero point"):
        P.requantize_params(0.5, 200, 0.5, 0)
    with pytest.raises(InvalidInputError, match="activation range"):
        P.PoolParams(10, -10)
    with pytest.raises(UnsupportedError, match=r"\(0, 1\)"):
        add_params(0.5, 0, 0.5, 0, 2.0**-21, 0)  # output multiplier 1/(2**20 * s_out) >= 1
