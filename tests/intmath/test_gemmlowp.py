"""gemmlowp's fixed-point functions against their Python-int references, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import gemmlowp, reference
from tests.strategies import boundary_ints, int32_values

INT32 = st.lists(int32_values(), min_size=1, max_size=24)
#: Q5.26 / Q4.27 raw values the TFLite kernels feed in, and the extremes.
NEGATIVE = st.lists(boundary_ints(-(2**31), 0), min_size=1, max_size=24)
INT16 = st.lists(boundary_ints(-(2**15), 2**15 - 1), min_size=1, max_size=24)


def _same(fn_name: str, values: list[int], *args) -> None:
    got = getattr(gemmlowp, fn_name)(np.array(values, dtype=np.int64), *args)
    expected = [getattr(reference, fn_name)(v, *args) for v in values]
    assert isinstance(got, np.ndarray) and got.dtype == np.int64
    assert got.tolist() == expected
    assert getattr(gemmlowp, fn_name)(values[0], *args) == expected[0]  # scalar call: int


@given(INT32)
def test_one_over_one_plus_x(values):
    _same("one_over_one_plus_x_for_x_in_0_1", values)


@given(INT32)
def test_one_minus_x_over_one_plus_x(values):
    _same("one_minus_x_over_one_plus_x_for_x_in_0_1", values)


@given(st.lists(boundary_ints(-(2**29), 0), min_size=1, max_size=24))
def test_exp_on_quarter_interval(values):
    _same("exp_on_interval_between_negative_one_quarter_and_0_excl", values)


@given(NEGATIVE, st.integers(0, 29))
def test_exp_on_negative_values(values, integer_bits):
    _same("exp_on_negative_values", values, integer_bits)


@given(INT32, st.integers(0, 29))
def test_logistic(values, integer_bits):
    _same("logistic", values, integer_bits)


@given(INT32, st.integers(0, 28))
def test_tanh(values, integer_bits):
    _same("tanh", values, integer_bits)


@given(INT32, st.integers(-31, 31))
def test_saturating_rounding_multiply_by_pot(values, exponent):
    _same("saturating_rounding_multiply_by_pot", values, exponent)


@given(INT32, int32_values())
def test_rounding_half_sum(values, b):
    got = gemmlowp.rounding_half_sum(np.array(values), b)
    assert got.tolist() == [reference.rounding_half_sum(v, b) for v in values]


@given(INT32.map(lambda v: [x or 1 for x in v]), st.integers(0, 31))
def test_reciprocal_with_headroom(values, integer_bits):
    r, n = gemmlowp.reciprocal_with_headroom(np.array(values), integer_bits)
    expected = [reference.reciprocal_with_headroom(v, integer_bits) for v in values]
    assert list(zip(r.tolist(), n.tolist(), strict=True)) == expected


@pytest.mark.parametrize(
    "name",
    [
        "saturating_rounding_doubling_high_mul_round_half_up_int16",
        "saturating_doubling_high_mul_toward_zero_int16",
    ],
)
@given(a=INT16, b=boundary_ints(-(2**15), 2**15 - 1))
def test_int16_multiplies(name, a, b):
    got = getattr(gemmlowp, name)(np.array(a), b)
    assert got.tolist() == [getattr(reference, name)(v, b) for v in a]


def test_accuracy_against_real_functions():
    """Tolerances measured on these grids (gemmlowp exp is good to ~2.3e-7 near 0), with margin:
    enough to catch a wrong constant, a dropped barrel-shifter step or a sign error."""
    q5 = np.arange(-(2**31), 0, 2**21 + 12345, dtype=np.int64)  # [-32, 0) in Q5.26
    exp = gemmlowp.exp_on_negative_values(q5, 5) / 2**31
    assert np.max(np.abs(exp - np.exp(q5 / 2**26))) < 5e-7
    q4 = np.arange(-(2**31), 2**31 - 1, 2**20 + 7, dtype=np.int64)  # [-16, 16) in Q4.27
    sig = gemmlowp.logistic(q4, 4) / 2**31
    th = gemmlowp.tanh(q4, 4) / 2**31
    assert np.max(np.abs(sig - 1 / (1 + np.exp(-q4 / 2**27)))) < 2e-7
    assert np.max(np.abs(th - np.tanh(q4 / 2**27))) < 3e-7
    assert gemmlowp.exp_on_negative_values(0, 5) == 2**31 - 1  # One() of Q0.31
    assert gemmlowp.logistic(0, 4) == 2**30 and gemmlowp.tanh(0, 4) == 0
    r, n = gemmlowp.reciprocal_with_headroom(5 * 2**19, 12)  # 1/5 = r / 2**(31 + n)
    assert abs(r / 2 ** (31 + n) - 0.2) < 1e-9 and n == 2  # 5 = 1.25 * 2**2


def test_errors():
    with pytest.raises(InvalidInputError, match="integer_bits"):
        gemmlowp.exp_on_negative_values(-1, 30)
    with pytest.raises(InvalidInputError, match="int32"):
        gemmlowp.logistic(2**31, 4)
    with pytest.raises(InvalidInputError, match="int16"):
        gemmlowp.saturating_doubling_high_mul_toward_zero_int16(2**15, 1)
    with pytest.raises(InvalidInputError, match="x = 0"):
        gemmlowp.reciprocal_with_headroom(np.array([1, 0]), 12)
