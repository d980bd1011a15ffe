"""Fixed-point multiplies against the Python-int references, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import fixedpoint, reference
from tests.intmath.strategies import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    apply_reference,
    assert_matches,
    fits_int64,
    int32_values,
    int_arrays,
    int_operands,
    shifts,
)

MULTIPLIES = ["multiply_shift_right_round_half_up", "multiply_shift_right_round_half_away"]


def _all_int64(expected) -> bool:
    flat = expected if isinstance(expected, list) else [expected]
    return all(INT64_MIN <= v <= INT64_MAX for v in flat)


def _check_multiply(name, a, b, s):
    expected = apply_reference(getattr(reference, name), a, b, s)
    got = getattr(fixedpoint, name)(a, b, s)
    narrow = fits_int64(a) and fits_int64(b) and _all_int64(expected)
    assert_matches(got, expected, object_result=not narrow)


@pytest.mark.parametrize("name", MULTIPLIES)
@given(a=int_operands(), b=int_operands(), s=shifts())
def test_multiply_matches_reference(name, a, b, s):
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        b = np.resize(b, a.shape)  # same length, so the operands broadcast
    _check_multiply(name, a, b, s)


@pytest.mark.parametrize("name", MULTIPLIES)
@given(data=st.data())
def test_multiply_int32_by_int16_elementwise_shifts(name, data):
    """The XS3 / NVDLA shape: accumulator-sized a, 16-bit scales, a shift per element."""
    a = data.draw(int_arrays(np.int32, min_size=1, max_size=20))
    b = data.draw(int_arrays(np.int16, min_size=len(a), max_size=len(a)))
    s = data.draw(int_arrays(np.int64, elements=shifts(0, 70), min_size=len(a), max_size=len(a)))
    _check_multiply(name, a, b, s)
    _check_multiply(name, a, b, int(s[0]))


def test_multiply_hand_examples():
    f = fixedpoint.multiply_shift_right_round_half_up
    # XS3 VLMUL: (a*b) >> 14 rounded, ties up: 3 * 2**13 / 2**14 = 1.5 -> 2, -1.5 -> -1.
    assert f(np.array([3, -3]), 2**13, 14).tolist() == [2, -1]
    g = fixedpoint.multiply_shift_right_round_half_away
    assert g(np.array([3, -3]), 2**13, 14).tolist() == [2, -2]
    # int64 operands whose product needs 126 bits: exact, and int64 again after the shift.
    y = f(np.array([INT64_MAX, INT64_MIN]), np.array([INT64_MAX, INT64_MIN]), 64)
    assert y.dtype == np.int64
    assert y.tolist() == [(INT64_MAX**2 + 2**63) // 2**64, 2**62]
    assert f(np.array([INT64_MAX]), INT64_MAX, 0).dtype == object  # does not fit: exact ints
    y = f(np.array([INT64_MIN, 1]), -1, 0)  # 2**63: one past int64
    assert y.dtype == object and y.tolist() == [2**63, -1]
    assert f(np.array([INT64_MIN, 1]), -1, 1).tolist() == [2**62, 0]
    assert f(np.array([INT64_MIN, 1]), -1, 1).dtype == np.int64


def test_multiply_errors():
    with pytest.raises(
        InvalidInputError,
        match=r"multiply_shift_right_round_half_up: shift "
        r"must be >= 0 \(first -1",
    ):
        fixedpoint.multiply_shift_right_round_half_up(np.array([1]), 2, -1)
    with pytest.raises(InvalidInputError, match="b must be integers"):
        fixedpoint.multiply_shift_right_round_half_away(1, 2.0, 1)


# --- gemmlowp ----------------------------------------------------------------------------------

SRDHM = "saturating_rounding_doubling_high_mul_round_half_up"


@given(a=int32_values(), b=int32_values())
def test_srdhm_scalars(a, b):
    f = getattr(fixedpoint, SRDHM)
    assert f(a, b) == getattr(reference, SRDHM)(a, b)


@given(data=st.data())
def test_srdhm_arrays(data):
    dtype = data.draw(st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint16]))
    n = data.draw(st.integers(1, 12))
    elems = int32_values()
    a = data.draw(int_arrays(dtype, elements=elems, min_size=n, max_size=n))
    b = data.draw(int_arrays(np.int32, elements=elems, min_size=n, max_size=n))
    expected = apply_reference(getattr(reference, SRDHM), a, b)
    assert_matches(getattr(fixedpoint, SRDHM)(a, b), expected, object_result=False)


def test_srdhm_ties_go_up():
    """ab = k * 2**30 with k odd is a tie of ab / 2**31; gemmlowp's nudge sends it toward +inf."""
    f = getattr(fixedpoint, SRDHM)
    a = np.array([-3, -1, 1, 3]) * 2**15
    assert f(a, 2**15).tolist() == [-1, 0, 1, 2]
    assert f(INT32_MIN, INT32_MIN) == INT32_MAX  # the only saturation
    assert f(INT32_MIN, INT32_MAX) == -INT32_MAX
    # C: ab = -2**30, nudge = 1 - 2**30, (1 - 2**31) / 2**31 truncates to 0 (the tie -1/2 -> 0).
    assert f(-(2**30), 1) == 0
    assert f(2**30, 1) == 1  # (2**30 + 2**30) / 2**31 = 1 (the tie +1/2 -> 1)


def test_srdhm_rejects_non_int32():
    f = getattr(fixedpoint, SRDHM)
    with pytest.raises(
        InvalidInputError, match=r"a must be int32 values.*first 2147483648, 1 of 2"
    ):
        f(np.array([1, 2**31]), 1)
    with pytest.raises(InvalidInputError, match="b must be int32"):
        f(1, -(2**31) - 1)


# --- rounding_divide_by_pot --------------------------------------------------------------------


@given(x=int_operands(), e=shifts(0, 70))
def test_rounding_divide_by_pot_is_half_away(x, e):
    expected = apply_reference(reference.rounding_divide_by_pot, x, e)
    assert_matches(
        fixedpoint.rounding_divide_by_pot(x, e), expected, object_result=not fits_int64(x)
    )


def test_rounding_divide_by_pot_negative_exponent():
    with pytest.raises(InvalidInputError, match=r"rounding_divide_by_pot: shift must be >= 0"):
        fixedpoint.rounding_divide_by_pot(5, -1)


@pytest.mark.parametrize("name", MULTIPLIES)
def test_multiply_narrow_operands_broadcast(name):
    """Narrow operands of different shapes: the product widens the wider one only when it has
    the result's shape (else one mixed multiply); 0-d arrays; uint32 by int8."""
    a = np.array([[-(2**31)], [2**31 - 1], [-3]], dtype=np.int32)  # (3, 1)
    b = np.array([-(2**15), 2**15 - 1, 5, -1], dtype=np.int16)  # (4,)
    u = np.array([0, 1, 2**32 - 1, 2**31], dtype=np.uint32)
    cases = (
        (a, b),
        (b, a),
        (a, np.int16(7)),
        (np.array(-5, dtype=np.int32), b),
        (u, b.view(np.int8)[::2]),
    )
    for x, y in cases:
        got = getattr(fixedpoint, name)(x, y, 3)
        assert got.dtype == np.int64
        assert got.tolist() == apply_reference(getattr(reference, name), x, y, 3)


@pytest.mark.parametrize("name", MULTIPLIES)
def test_multiply_long_narrow_arrays(name):
    """int32 * int16 past one block of the in-place rounding, shifts with and without ties."""
    n = 2**17 + 3
    rng = np.random.default_rng(1)
    a = rng.integers(INT32_MIN, INT32_MAX + 1, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**15), 2**15, n, dtype=np.int64).astype(np.int16)
    a[:4], b[:4] = [INT32_MIN, INT32_MIN, INT32_MAX, -3], [-(2**15), 2**15 - 1, -(2**15), 1]
    ref = getattr(reference, name)
    for s in (1, 14):
        got = getattr(fixedpoint, name)(a, b, s)
        assert got.tolist() == [ref(x, y, s) for x, y in zip(a.tolist(), b.tolist(), strict=True)]


MBQM = "multiply_by_quantized_multiplier_double_rounding"


@given(data=st.data())
def test_mbqm_matches_reference(data):
    """TFLite's requantization multiply: per-element (per-channel) multipliers and shifts."""
    n = data.draw(st.integers(1, 20))
    s = data.draw(int_arrays(np.int64, elements=shifts(-31, 31), min_size=n, max_size=n))
    # x * 2**max(s, 0) must stay in int32: draw x below 2**(31 - left shift).
    x = np.array(
        [data.draw(st.integers(-(2 ** (31 - max(v, 0))), 2 ** (31 - max(v, 0)) - 1)) for v in s]
    )
    m = data.draw(int_arrays(np.int32, min_size=n, max_size=n))
    expected = apply_reference(getattr(reference, MBQM), x, m, s)
    assert_matches(getattr(fixedpoint, MBQM)(x, m, s), expected, object_result=False)
    assert getattr(fixedpoint, MBQM)(int(x[0]), int(m[0]), int(s[0])) == expected[0]


def test_mbqm_rounds_twice_and_rejects_overflow():
    f = getattr(fixedpoint, MBQM)
    # 1 * 0.5 = 0.5 -> 1 (tie up); then 1 / 2 = 0.5 -> 1 (tie away): 1/4 becomes 1.
    assert f(1, 2**30, -1) == 1
    assert f(-1, 2**30, -1) == 0  # -0.5 -> 0 (tie up), 0 / 2 = 0
    with pytest.raises(InvalidInputError, match="int32"):
        f(2**20, 2**30, 12)  # 2**32 does not fit TFLite's int32
    with pytest.raises(InvalidInputError, match="shift"):
        f(1, 2**30, -32)
