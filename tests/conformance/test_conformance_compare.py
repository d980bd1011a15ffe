"""Exact comparison: one LSB, one bit of a float, a dtype or a counter off is a mismatch."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.conformance.compare import compare_output, compare_outputs, format_value


def test_identical_tensors_match():
    y = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    assert compare_output("Y", y, y.copy()) is None


def test_one_lsb_off_reports_first_index_values_and_count():
    want = np.zeros((2, 3, 4), dtype=np.int32)
    got = want.copy()
    got[1, 2, 3] = 1  # flat index 1*12 + 2*4 + 3 = 23
    got[1, 0, 1] = -1  # flat index 13: the first difference in C order
    m = compare_output("Y", want, got)
    assert m is not None
    assert (m.index, m.nd_index) == (13, (1, 0, 1))
    assert (m.expected, m.actual) == (0, -1)
    assert (m.count, m.size) == (2, 24)
    assert m.reason == "2 of 24 elements differ"


def test_extreme_int64_values_compare_exactly():
    # 2**63 - 1 and 2**63 - 2 are the same double; comparison must not go through floats.
    want = np.array([2**63 - 1], dtype=np.int64)
    m = compare_output("Y", want, np.array([2**63 - 2], dtype=np.int64))
    assert m is not None and (m.expected, m.actual) == (2**63 - 1, 2**63 - 2)


def test_dtype_mismatch_even_with_equal_values():
    want = np.array([1, 2], dtype=np.int8)
    m = compare_output("Y", want, want.astype(np.int16))
    assert m is not None and m.reason == "dtype int16, expected int8" and m.index is None


def test_shape_mismatch_even_with_equal_data():
    want = np.arange(6, dtype=np.int8).reshape(2, 3)
    m = compare_output("Y", want, want.reshape(3, 2))
    assert m is not None and m.reason == "shape (3, 2), expected (2, 3)"


@pytest.mark.parametrize("actual", [[1, 2], 3, None], ids=["list", "int", "none"])
def test_non_array_output_for_a_tensor(actual):
    m = compare_output("Y", np.array([1, 2], dtype=np.int8), actual)
    assert m is not None and m.reason.startswith("expected a int8 tensor, got a")


def test_numpy_scalar_is_a_zero_d_tensor():
    assert compare_output("Y", np.array(5, dtype=np.int16), np.int16(5)) is None
    assert compare_output("Y", np.array(5, dtype=np.int16), np.int32(5)) is not None


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floats_compare_by_bits_with_all_nans_equal(dtype):
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    quiet = np.array([np.nan], dtype=dtype)
    other_nan = (quiet.view(bits) | 1).view(dtype)  # a NaN with another payload
    want = np.array([np.nan, 0.0, 1.0, -np.inf], dtype=dtype)
    same = np.array([other_nan[0], 0.0, 1.0, -np.inf], dtype=dtype)
    assert compare_output("y", want, same) is None

    signed_zero = np.array([np.nan, -0.0, 1.0, -np.inf], dtype=dtype)
    m = compare_output("y", want, signed_zero)
    assert m is not None and (m.index, m.count) == (1, 1)
    assert str(m.actual) == "-0.0" and str(m.expected) == "0.0"

    one_ulp = want.copy()
    one_ulp[2] = np.nextafter(dtype(1.0), dtype(2.0))
    m = compare_output("y", want, one_ulp)
    assert m is not None and m.index == 2

    nan_vs_number = want.copy()
    nan_vs_number[0] = 0.0
    m = compare_output("y", want, nan_vs_number)
    assert m is not None and m.index == 0 and np.isnan(m.expected)


def test_counters_compare_by_value():
    assert compare_output("SAT", 3, 3) is None
    assert compare_output("SAT", 3, np.int64(3)) is None
    assert compare_output("SAT", 3, np.array(3, dtype=np.uint32)) is None
    m = compare_output("SAT", 3, 4)
    assert m is not None and (m.expected, m.actual, m.reason) == (3, 4, "counter differs")


@pytest.mark.parametrize("actual", [True, 3.0, np.array([3]), "3"])
def test_a_counter_must_be_an_integer(actual):
    m = compare_output("SAT", 3, actual)
    assert m is not None and m.reason.startswith("expected an integer counter, got")


def test_missing_outputs_fail_and_unexpected_ones_are_ignored():
    want = {"Y": np.array([1], dtype=np.int8), "SAT": 0}
    got = {"Y": np.array([1], dtype=np.int8), "EXTRA": 7}
    (m,) = compare_outputs(want, got)
    assert m.output == "SAT" and m.reason == "output missing from the result (it returned EXTRA, Y)"
    assert compare_outputs({"Y": want["Y"]}, got) == ()


def test_format_value_shows_float_bits():
    assert format_value(float(np.float32(0.1)), "float32") == "0.1 (0x3dcccccd)"
    assert format_value(float("nan"), "float16") == "nan (0x7e00)"
    assert format_value(-5, "int8") == "-5"
