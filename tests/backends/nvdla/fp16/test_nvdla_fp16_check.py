"""Seed 001's FP16 error thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends.nvdla.fp16.check import (
    ConvMode,
    cdp_violations,
    conv_max_exp,
    conv_violations,
    fp16_exponent,
    pdp_violations,
    sdp_violations,
)
from quantemu.errors import InvalidInputError

H = np.float16


def test_exponent_field_and_max_exp():
    # exp(8) = 3 -> & ~3 = 0; exp(16) = 4 -> 4; exp(0.25) = -2 -> & ~3 = -4.
    assert fp16_exponent(np.array([8, 16, 0.25], dtype=H)).tolist() == [3, 4, -2]
    data = np.array([[8, 16], [0.25, 1]], dtype=H)
    wt = np.array([[1, 16], [1, 1]], dtype=H)
    assert conv_max_exp(data, wt).tolist() == [8, 0]  # max(0 + 0, 4 + 4); max(-4 + 0, 0 + 0)


def test_conv_dc_threshold():
    # max_exp 0, R*S*C = 64: 2^-20 * 64 * 2 = 2^-13; a = 1.0 -> 2^(0 - 10) = 2^-10.
    # Bound = 2^-13 + 2^-10 = 0.001098. b off by 0.001 passes, by 0.0012 fails.
    a = np.array([1.0, 1.0], dtype=H)
    b = np.array([1.0 - 0.000977, 1.0 + 0.00195], dtype=H)  # one and two fp16 ulps(ish)
    v = conv_violations(a, b, np.array([0, 0]), mode=ConvMode.DC, taps=64)
    assert v.tolist() == [False, True]
    # Winograd with C = 64 uses 18 * 64 taps: 2^-20 * 2304 = 0.0044 -> both pass.
    w = conv_violations(a, b, np.array([0, 0]), mode=ConvMode.WINOGRAD, taps=64)
    assert w.tolist() == [False, False]


def test_sdp_is_bit_exact():
    a = np.array([0.0, 1.0, np.nan], dtype=H)
    b = np.array([-0.0, 1.0, np.nan], dtype=H)
    assert sdp_violations(a, b).tolist() == [True, False, False]


def test_cdp_and_pdp_absolute_and_relative_thresholds():
    # fp16 ulp at 0.05 is 2^-15 = 3.05e-5. Two ulps (6.1e-5 <= 1e-4) against a window max of
    # 10 (relative 6.1e-6) pass; the same two ulps against a window max of 0.05 (relative
    # 0.0012 > 0.001) violate; four ulps (1.22e-4 > 1e-4) violate.
    a = np.full(3, 0.05, dtype=H)
    ulp = np.float64(2.0**-15)
    b = (a.astype(np.float64) + np.array([2, 2, 4]) * ulp).astype(H)
    windows = np.array([[10.0, -1], [0.05, 0.01], [10.0, 1.0]])
    assert cdp_violations(a, b, windows).tolist() == [False, True, True]
    assert pdp_violations(a, b, windows).tolist() == [False, True, True]


def test_nan_violates_and_inputs_are_checked():
    a = np.array([np.nan], dtype=H)
    assert pdp_violations(a, np.array([1.0], dtype=H), np.ones((1, 2))).tolist() == [True]
    with pytest.raises(InvalidInputError, match="must be a float16 array"):
        sdp_violations(np.array([1.0]), np.array([1.0], dtype=H))
    with pytest.raises(InvalidInputError, match="a has shape"):
        sdp_violations(np.ones(2, H), np.ones(3, H))
