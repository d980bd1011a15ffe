"""The rounding shift whose rounding add wraps, against the Python-int reference, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import reference, wrapping_shift
from tests.intmath.strategies import (
    INT32_MAX,
    INT32_MIN,
    assert_matches,
    big_ints,
    int32_values,
    int64_values,
)

F = "shift_right_round_half_up_wrapping_add"
FC = "shift_right_round_half_up_wrapping_add_count"
BITS = st.sampled_from([1, 2, 8, 16, 31, 32, 33, 48, 61, 62])


@st.composite
def near_wrap(draw, bits=32):
    """``(x, s)`` with ``x`` at or next to ``2**(bits-1) - 2**(s-1)``, where the add starts to
    wrap, and next to the rails and the ties."""
    s = draw(st.integers(0, bits - 1))
    hi, half = 2 ** (bits - 1) - 1, 2 ** (s - 1) if s else 0
    edge = hi - half
    base = draw(st.sampled_from([edge, hi, -hi - 1, half, -half, 0]))
    return base + draw(st.integers(-2, 2)), s


def _check_pairs(xs, ss, bits):
    """Scalar calls, one int64 array with element-wise shifts, and one shift for the array."""
    ref, ref_c = getattr(reference, F), getattr(reference, FC)
    fn, fn_c = getattr(wrapping_shift, F), getattr(wrapping_shift, FC)
    expected = [ref(x, s, bits=bits) for x, s in zip(xs, ss, strict=True)]
    flags = [ref_c(x, s, bits=bits)[1] for x, s in zip(xs, ss, strict=True)]
    assert [fn(x, s, bits=bits) for x, s in zip(xs, ss, strict=True)] == expected
    assert [fn_c(x, s, bits=bits) for x, s in zip(xs, ss, strict=True)] == list(
        zip(expected, flags, strict=True)
    )
    fits = all(-(2**63) <= x < 2**63 for x in xs)
    xa = np.array(xs, dtype=np.int64 if fits else object)
    sa = np.array(ss, dtype=np.int64)
    assert_matches(fn(xa, sa, bits=bits), expected, object_result=False)
    y, w = fn_c(xa, sa, bits=bits)
    assert y.tolist() == expected and w.dtype == bool and w.tolist() == flags
    s0 = ss[0]
    assert fn(xa, s0, bits=bits).tolist() == [ref(x, s0, bits=bits) for x in xs]


@given(data=st.data(), bits=BITS)
def test_matches_reference(data, bits):
    xs = data.draw(st.lists(int64_values() | big_ints(), min_size=1, max_size=10))
    ss = data.draw(st.lists(st.integers(0, bits - 1), min_size=len(xs), max_size=len(xs)))
    _check_pairs(xs, ss, bits)


@given(data=st.data())
def test_near_the_wrap_int32(data):
    pairs = data.draw(st.lists(near_wrap(), min_size=1, max_size=12))
    _check_pairs([x for x, _ in pairs], [s for _, s in pairs], 32)


@given(data=st.data(), bits=BITS)
def test_near_the_wrap_any_width(data, bits):
    pairs = data.draw(st.lists(near_wrap(bits), min_size=1, max_size=8))
    _check_pairs([x for x, _ in pairs], [s for _, s in pairs], bits)


@given(x=st.lists(int32_values(), min_size=1, max_size=20), s=st.integers(0, 31))
def test_int32_arrays_keep_dtype_paths(x, s):
    """int32 and int64 arrays (the accumulators of the XS3 host reference) give the same."""
    ref = getattr(reference, F)
    expected = [ref(v, s) for v in x]
    for dtype in (np.int32, np.int64):
        assert getattr(wrapping_shift, F)(np.array(x, dtype=dtype), s).tolist() == expected


def test_agrees_with_half_up_where_nothing_wraps():
    from quantemu.intmath import shift_right_round_half_up

    x = np.array([INT32_MIN, -5, -4, -3, 0, 3, 4, 5, INT32_MAX - 2**15])
    for s in range(0, 17):
        assert getattr(wrapping_shift, F)(x, s).tolist() == shift_right_round_half_up(x, s).tolist()


def test_hand_examples():
    """xs3.md RSHR_W: 2**31 - 1 + 2**2 wraps to -2**31 + 3, >> 3 gives -2**28."""
    y, w = getattr(wrapping_shift, FC)(np.array([INT32_MAX, INT32_MAX - 3, INT32_MAX - 4]), 3)
    assert y.tolist() == [-(2**28), -(2**28), 2**28 - 1]
    assert w.tolist() == [True, True, False]
    assert getattr(wrapping_shift, F)(2**40 + 5, 1) == 3  # read as int32 first: 5


@pytest.mark.parametrize("s", [-1, 32, 2**70])
def test_shift_out_of_range(s):
    with pytest.raises(InvalidInputError, match=r"shift must be in \[0, bits - 1\]"):
        getattr(wrapping_shift, F)(5, s)


def test_bits_out_of_range():
    with pytest.raises(InvalidInputError, match="bits"):
        getattr(wrapping_shift, F)(5, 1, bits=63)
