"""QUANTIZE, DEQUANTIZE, CONCATENATION and PAD against the scalar reference, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import reference, requant
from quantemu.backends.tflite.params import requantize_params
from quantemu.errors import InvalidInputError
from tests.backends.tflite.strategies import codes, scales, zero_points


@given(codes((257,)), scales(), zero_points, scales(), zero_points)
def test_requantize_matches_reference(x, si, zi, so, zo):
    p = requantize_params(si, zi, so, zo)
    y, _ = requant.requantize(x, p)
    assert y.tolist() == [reference.requantize(int(v), p) for v in x]


@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=50), scales(), zero_points)
def test_quantize_float_matches_reference(values, scale, zp):
    x = np.array(values, np.float32)
    y, _ = requant.quantize_float(x, scale, zp)
    assert y.tolist() == [reference.quantize_float(float(v), scale, zp) for v in x]


def test_quantize_float_ties_go_away_from_zero():
    y, c = requant.quantize_float(np.array([0.5, -0.5, 1.5, -2.5, 300.0], np.float32), 1.0, 0)
    assert y.tolist() == [1, -1, 2, -3, 127] and c["output_saturated"] == 1
    with pytest.raises(InvalidInputError, match="NaN"):
        requant.quantize_float(np.array([np.nan], np.float32), 1.0, 0)


@given(codes((64,)), scales(), zero_points)
def test_dequantize_matches_reference(x, scale, zp):
    y = requant.dequantize(x, scale, zp)
    assert y.dtype == np.float32
    assert y.tolist() == [reference.dequantize(int(v), scale, zp) for v in x]


def test_concatenation_requantizes_only_inputs_that_differ():
    p_same = requantize_params(0.5, 1, 0.5, 1)
    p_half = requantize_params(0.25, 0, 0.5, 1)  # x/2 + 1
    y, c = requant.concatenation([np.array([[3]]), np.array([[5, -7]])], 1, [p_same, p_half])
    # 5/2 = 2.5 -> SRDHM(5, 2**30) = 3 (tie up), + 1 = 4; -7/2 = -3.5 -> -3, + 1 = -2
    assert y.tolist() == [[3, 4, -2]] and c == {"output_saturated": 0, "activation_clamped": 0}


def test_pad_uses_zero_point():
    y = requant.pad(np.ones((1, 1, 1, 1), np.int8), [(0, 0), (0, 0), (1, 0), (0, 1)], -7)
    assert y.tolist() == [[[[-7, -7], [1, -7]]]]
