"""Rounding right shifts against the Python-int references, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import _shift_kernels, reference, rounding
from quantemu.intmath.policies import NegativeShift
from tests.intmath.strategies import (
    INT64_MAX,
    INT64_MIN,
    apply_reference,
    assert_matches,
    big_ints,
    fits_int64,
    int64_values,
    int_arrays,
    int_operands,
    object_arrays,
    shifts,
)

NAMES = [
    "shift_right_round_half_up",
    "shift_right_round_half_down",
    "shift_right_round_half_away",
    "shift_right_round_half_even",
    "shift_right_floor",
    "shift_right_toward_zero",
]


def _pair(name):
    return getattr(rounding, name), getattr(reference, name)


@st.composite
def near_ties(draw, shift=None):
    """``(x, s)`` with ``x = q * 2**s + r`` and ``r`` at or next to 0, the tie and ``2**s - 1``."""
    s = draw(shifts(0, 70)) if shift is None else shift
    q = draw(int64_values())
    half = 2 ** (s - 1) if s else 0
    r = draw(st.sampled_from(sorted({0, 1, max(half - 1, 0), half, half + 1, 2**s - 1})))
    return q * 2**s + r, s


def _check(name, x, s, **kw):
    fn, ref = _pair(name)
    expected = apply_reference(ref, x, s, **kw)
    assert_matches(fn(x, s, **kw), expected, object_result=not fits_int64(x))


def _check_all(x, s, **kw):
    """Every rule on the same inputs (one hypothesis example serves all six)."""
    for name in NAMES:
        _check(name, x, s, **kw)


@given(x=int_operands(), s=shifts())
def test_scalar_shift_matches_reference(x, s):
    _check_all(x, s)


@given(x=int_arrays(np.int64, max_size=30), s=shifts(0, 70))
def test_int64_fast_paths(x, s):
    """Long int64 arrays with one shift: the biased-add paths and their overflow fallback."""
    _check_all(x, s)


@given(data=st.data())
def test_ties(data):
    pairs = data.draw(st.lists(near_ties(), min_size=1, max_size=8))
    fits = [(x, s) for x, s in pairs if INT64_MIN <= x <= INT64_MAX]
    for x, s in pairs:  # Python-int scalar calls, any size
        _check_all(x, s)
    if fits:  # element-wise shifts on an int64 array
        _check_all(np.array([x for x, _ in fits]), np.array([s for _, s in fits]))
    s = pairs[0][1]  # one shift for a whole array, int64 when it fits, else object
    xs = [x for x, t in pairs if t == s]
    int64 = all(INT64_MIN <= x <= INT64_MAX for x in xs)
    _check_all(np.array(xs, dtype=np.int64 if int64 else object), s)


@given(data=st.data())
def test_elementwise_shift_arrays(data):
    x = data.draw(st.one_of(int_arrays(), object_arrays()))
    s = data.draw(int_arrays(np.int64, elements=shifts(), min_size=len(x), max_size=len(x)))
    _check_all(x, s)
    _check_all(x[:1].reshape(()) if x.dtype != object else int(x[0]), s)  # broadcast a scalar


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("s", [61, 62, 63, 64, 65, 66, 100, 1000, 2**70])
def test_extreme_shifts_of_int64_rails(name, s):
    """|x| <= 2**63: shifts >= 63 are worked out on Python ints (e.g. -2**63 >> 64 is a tie)."""
    xs = [INT64_MIN, INT64_MIN + 1, -(2**62) - 1, -(2**62), -1, 0, 1, 2**62, INT64_MAX]
    fn, ref = _pair(name)
    expected = [ref(x, min(s, 200)) for x in xs]  # beyond 65 nothing changes (test says so)
    assert fn(np.array(xs), s).tolist() == expected
    assert fn(np.array(xs), np.full(len(xs), s, dtype=object)).tolist() == expected
    assert [fn(x, s) for x in xs] == expected


@pytest.mark.parametrize("name", NAMES)
def test_fast_path_overflow_guard(name):
    """Around ``2**63 - 1 - 2**(s-1)`` the biased add ``x + c`` would overflow: every shift."""
    fn, ref = _pair(name)
    for s in range(1, 63):
        edge = INT64_MAX - 2 ** (s - 1)
        xs = [v for v in (edge - 1, edge, edge + 1, INT64_MAX - 1, 3) if v <= INT64_MAX]
        assert fn(np.array(xs), s).tolist() == [ref(v, s) for v in xs], s


def test_saturating_left_beyond_width():
    """For k >= bits every x != 0 saturates; x = -1 reaches lo exactly at k = bits - 1."""
    f = rounding.shift_right_floor
    kw = {"negative": NegativeShift.SATURATING_LEFT}
    x = np.array([-2, -1, 0, 1])
    assert f(x, -66, bits=1, **kw).tolist() == [-1, -1, 0, 0]
    assert f(x, -70, bits=8, **kw).tolist() == [-128, -128, 0, 127]
    assert f(x, -7, bits=8, **kw).tolist() == [-128, -128, 0, 127]
    assert f(x, -6, bits=8, **kw).tolist() == [-128, -64, 0, 64]
    assert f(x, -63, bits=64, **kw).tolist() == [INT64_MIN, INT64_MIN, 0, INT64_MAX]
    assert f(x.astype(object), -66, bits=1, **kw).tolist() == [-1, -1, 0, 0]
    assert rounding.shift_left_saturate(x, 100, 8).tolist() == [-128, -128, 0, 127]


def test_half_tie_at_int64_min_shift_64():
    """-2**63 / 2**64 = -1/2 exactly: the only int64 tie at shift 64."""
    x = np.array([INT64_MIN])
    got = {name: int(getattr(rounding, name)(x, 64)[0]) for name in NAMES}
    assert got == {
        "shift_right_round_half_up": 0,
        "shift_right_round_half_down": -1,
        "shift_right_round_half_away": -1,
        "shift_right_round_half_even": 0,
        "shift_right_floor": -1,
        "shift_right_toward_zero": 0,
    }


def test_hand_examples():
    # xs3 page: RSHR(5, 1) = 3, RSHR(-5, 1) = -2, RSHR(-8, 4) = 0, RSHR(-9, 4) = -1.
    assert rounding.shift_right_round_half_up(
        np.array([5, -5, -8, -9]), np.array([1, 1, 4, 4])
    ).tolist() == [3, -2, 0, -1]
    # nvdla page: -2.5 -> -3, 2.5 -> 3 (half away from zero).
    assert rounding.shift_right_round_half_away(np.array([-5, 5]), 1).tolist() == [-3, 3]
    # Largest positive value next to the overflow of the biased add: (2**63 - 1 + 2**6) >> 7.
    assert rounding.shift_right_round_half_up(np.array([INT64_MAX]), 7).tolist() == [2**56]
    assert rounding.shift_right_round_half_even(np.array([INT64_MAX, INT64_MIN]), 1).tolist() == [
        2**62,
        -(2**62),
    ]


def test_shift_zero_returns_a_copy():
    x = np.array([1, -2, 3])
    for name in NAMES:
        y = getattr(rounding, name)(x, 0)
        assert y.tolist() == [1, -2, 3]
        assert not np.shares_memory(x, y)


# --- negative shifts ---------------------------------------------------------------------------


@given(x=int_operands(), s=shifts(-70, 70), bits=st.sampled_from([1, 8, 16, 32, 48, 63, 64]))
def test_saturating_left(x, s, bits):
    kw = {"negative": NegativeShift.SATURATING_LEFT, "bits": bits}
    _check_all(x, s, **kw)


@given(data=st.data())
def test_saturating_left_elementwise(data):
    x = data.draw(st.one_of(int_arrays(), object_arrays()))
    s = data.draw(int_arrays(np.int64, elements=shifts(-70, 70), min_size=len(x), max_size=len(x)))
    bits = data.draw(st.sampled_from([1, 8, 32, 63, 64]))
    _check_all(x, s, negative=NegativeShift.SATURATING_LEFT, bits=bits)


@given(data=st.data())
def test_exact_left(data):
    x = data.draw(st.one_of(int_arrays(), object_arrays(), int64_values(), big_ints()))
    s = data.draw(shifts(-70, 70))
    if isinstance(x, np.ndarray) and data.draw(st.booleans()):  # element-wise shifts
        s = data.draw(
            int_arrays(np.int64, elements=shifts(-70, 70), min_size=len(x), max_size=len(x))
        )
    for name in NAMES:
        fn, ref = _pair(name)
        expected = apply_reference(ref, x, s, negative=NegativeShift.LEFT)
        flat = expected if isinstance(expected, list) else [expected]
        if (
            isinstance(x, np.ndarray)
            and fits_int64(x)
            and not all(INT64_MIN <= v <= INT64_MAX for v in flat)
        ):
            with pytest.raises(InvalidInputError, match="does not fit in int64"):
                fn(x, s, negative=NegativeShift.LEFT)
            continue
        assert_matches(
            fn(x, s, negative=NegativeShift.LEFT), expected, object_result=not fits_int64(x)
        )


def test_left_policy_examples():
    f = rounding.shift_right_round_half_up
    assert f(3, -70, negative=NegativeShift.LEFT) == 3 * 2**70  # Python ints: exact
    assert f(np.array([-1, 0]), -63, negative=NegativeShift.LEFT).tolist() == [INT64_MIN, 0]
    assert f(np.array([0, 5]), np.array([-100, 1]), negative=NegativeShift.LEFT).tolist() == [0, 3]
    with pytest.raises(InvalidInputError, match=r"first 1, 1 of 2"):
        f(np.array([0, 1]), -63, negative=NegativeShift.LEFT)
    with pytest.raises(InvalidInputError, match="does not fit"):
        f(np.array([-1]), -64, negative=NegativeShift.LEFT)


# --- shift_left_saturate -------------------------------------------------------------------------


@given(x=int_operands(), s=shifts(0, 70), bits=st.sampled_from([1, 2, 8, 16, 32, 63, 64]))
def test_shift_left_saturate(x, s, bits):
    expected = apply_reference(reference.shift_left_saturate, x, s, bits=bits)
    got = rounding.shift_left_saturate(x, s, bits)
    assert_matches(got, expected, object_result=not fits_int64(x))


@given(x=int_arrays(), bits=st.sampled_from([1, 8, 32, 64]), data=st.data())
def test_shift_left_saturate_elementwise(x, bits, data):
    s = data.draw(int_arrays(np.int64, elements=shifts(0, 70), min_size=len(x), max_size=len(x)))
    expected = apply_reference(reference.shift_left_saturate, x, s, bits=bits)
    assert_matches(
        rounding.shift_left_saturate(x, s, bits), expected, object_result=not fits_int64(x)
    )


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_negative_shift_is_an_error_by_default(name):
    fn = getattr(rounding, name)
    with pytest.raises(InvalidInputError, match=rf"{name}: shift must be >= 0.*first -3, 2 of 4"):
        fn(np.array([1, 2, 3, 4]), np.array([0, -3, 2, -1]))
    with pytest.raises(InvalidInputError, match=r"NegativeShift\.LEFT"):
        fn(5, -1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"negative": NegativeShift.SATURATING_LEFT}, "needs bits="),
        ({"negative": NegativeShift.SATURATING_LEFT, "bits": 0}, r"bits = 0 is outside \[1, 64\]"),
        ({"negative": NegativeShift.SATURATING_LEFT, "bits": 65}, "outside"),
        ({"bits": 8}, "only used with negative=NegativeShift.SATURATING_LEFT"),
        ({"negative": "left"}, "must be a NegativeShift member"),
    ],
)
def test_policy_errors(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        rounding.shift_right_round_half_up(np.array([1]), 1, **kwargs)


@pytest.mark.parametrize(
    ("x", "s"),
    [
        (1.5, 1),
        (np.array([1.0]), 1),
        (True, 1),
        (np.array([1]), 1.0),
        (np.array([1]), True),
        (np.array(["a"]), 1),
    ],
)
def test_non_integer_operands(x, s):
    with pytest.raises(InvalidInputError, match=r"shift_right_floor: (x|shift) must be integers"):
        rounding.shift_right_floor(x, s)


def test_shift_left_saturate_errors():
    with pytest.raises(InvalidInputError, match=r"shift_left_saturate: shift must be >= 0"):
        rounding.shift_left_saturate(np.array([1]), -1, 8)
    with pytest.raises(InvalidInputError, match="outside"):
        rounding.shift_left_saturate(1, 1, 0)


def test_results_are_int64_or_python_int():
    assert rounding.shift_right_round_half_up(np.array([5], dtype=np.int8), 1).dtype == np.int64
    assert type(rounding.shift_right_round_half_up(np.int16(5), 1)) is int
    assert (
        rounding.shift_right_round_half_up(np.array([2**64 - 1], dtype=np.uint64), 1).dtype
        == object
    )
    assert rounding.shift_right_round_half_up(np.zeros((2, 0), dtype=np.int64), 3).shape == (2, 0)


# --- the binary64 path of half_even and the block-wise in-place paths --------------------------

SPAN = 2**51  # the binary64 path of half_even takes int64 arrays with -2**51 <= x < 2**51


@pytest.mark.parametrize("s", [1, 2, 7, 14, 31, 50, 51, 52, 62])
def test_half_even_binary64_bound(s):
    """Arrays inside the binary64 path's bound, and with one value beyond it (the integer path):
    min and max decide, so each side is checked alone and mixed with the other."""
    fn, ref = _pair("shift_right_round_half_even")
    h = 2 ** (s - 1)
    near = [-SPAN, -SPAN + 1, SPAN - 1, SPAN - h, -SPAN + h, h, -h, 3 * h, -3 * h, 0, 1, -1]
    inside = [v for v in near if -SPAN <= v < SPAN]
    outside = [-SPAN - 1, SPAN, SPAN + h, INT64_MAX, INT64_MIN]
    for xs in (inside, *([*inside, v] for v in outside), *([v] for v in inside + outside)):
        assert fn(np.array(xs, dtype=np.int64), s).tolist() == [ref(v, s) for v in xs], (s, xs)


@given(data=st.data())
def test_half_even_ties_near_binary64_bound(data):
    """Ties and their neighbours ``q * 2**s + r`` close to ``±2**51``, one shift per array."""
    s = data.draw(st.integers(1, 53))
    edge = SPAN >> s if s < 51 else 1
    q = st.integers(-edge - 2, edge + 2) | st.integers(-2, 2)
    half = 2 ** (s - 1)
    r = st.sampled_from(sorted({0, 1, half - 1, half, half + 1, 2**s - 1}))
    xs = data.draw(st.lists(st.builds(lambda a, b: a * 2**s + b, q, r), min_size=1, max_size=9))
    fn, ref = _pair("shift_right_round_half_even")
    assert fn(np.array(xs, dtype=np.int64), s).tolist() == [ref(v, s) for v in xs]


@pytest.mark.parametrize("name", NAMES)
def test_narrow_input_rounded_in_place_across_blocks(name):
    """An int32 array is widened into a copy that each rule rounds in place (half_away and
    toward_zero block by block): a length past one block, rails and ties at the block edge."""
    fn, ref = _pair(name)
    n = _shift_kernels._BLOCK + 5
    x = np.random.default_rng(0).integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    edge = _shift_kernels._BLOCK
    x[edge - 3 : edge + 3] = [-(2**31), 2**31 - 1, -64, 64, -65, 63]  # ties of s = 7 included
    for s in (1, 7, 31):
        assert fn(x, s).tolist() == [ref(v, s) for v in x.tolist()], s


@pytest.mark.parametrize("name", NAMES)
def test_narrow_input_layouts(name):
    """The in-place paths on 2-D C and Fortran-ordered and on strided narrow arrays."""
    fn, ref = _pair(name)
    base = np.arange(-12, 12, dtype=np.int16).reshape(4, 6) * 1001
    for x in (base, np.asfortranarray(base), base[:, ::2], base.T):
        want = [[ref(int(v), 3) for v in row] for row in x.tolist()]
        assert fn(x, 3).tolist() == want
