"""The float roundings of parameter derivation against their references, with ==.

``float64_round_half_away_add_truncate`` replaces the ``trunc(x + copysign(0.5, x))`` and
``sign(x) * floor(|x| + 0.5)`` copies the backends held; both are checked here too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import floatconv, reference
from tests.intmath.test_floatconv import _special, float32_values, float64_values

H64 = "float64_round_half_away_add_truncate"
H32 = "float32_round_half_up_add_floor"
NAN = float("nan")


def _same(got: float, want: float) -> bool:
    """Equal values, or both NaN (NaN passes through)."""
    return (math.isnan(got) and math.isnan(want)) or got == want


@given(xs=st.lists(float64_values() | st.just(NAN), min_size=1, max_size=12))
def test_half_away_matches_reference(xs):
    ref, fn = getattr(reference, H64), getattr(floatconv, H64)
    got = fn(np.array(xs, dtype=np.float64))
    assert got.dtype == np.float64
    assert all(_same(g, ref(v)) for g, v in zip(got.tolist(), xs, strict=True))
    scalar = fn(xs[0])
    assert isinstance(scalar, np.float64) and _same(float(scalar), ref(xs[0]))


@given(xs=st.lists(float32_values(), min_size=1, max_size=12))
def test_half_away_of_float32_is_computed_in_float64(xs):
    """float32 operands are widened first: ``0.49999997`` gives 0 (a float32 add gives 1)."""
    ref, fn = getattr(reference, H64), getattr(floatconv, H64)
    got = fn(np.array(xs, dtype=np.float32))
    assert got.dtype == np.float64
    assert got.tolist() == [ref(v) for v in xs]


@given(xs=st.lists(float64_values(), min_size=1, max_size=12))
def test_half_away_equals_the_former_backend_copies(xs):
    """The copies it replaced: xs3 ``trunc(x + copysign(0.5, x))``, xs3/nvdla
    ``sign(x) * floor(|x| + 0.5)`` (NumPy and ``math``)."""
    x = np.array(xs, dtype=np.float64)
    got = getattr(floatconv, H64)(x)
    assert got.tolist() == np.trunc(x + np.copysign(0.5, x)).tolist()
    with np.errstate(invalid="ignore"):
        assert got.tolist() == (np.sign(x) * np.floor(np.abs(x) + 0.5)).tolist()
    finite = [v for v in xs if math.isfinite(v)]
    assert [int(getattr(floatconv, H64)(v)) for v in finite] == [
        math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1) for v in finite
    ]


def test_half_away_hand_examples():
    f = getattr(floatconv, H64)
    assert f(np.array([-2.5, -0.5, 0.5, 2.5, 127.5, -128.5])).tolist() == [-3, -1, 1, 3, 128, -129]
    assert float(f(0.49999999999999994)) == 1.0  # the double add rounds up
    assert float(f(np.float32(0.49999997))) == 0.0  # exact in float64
    assert float(f(3)) == 3.0 and float(f(np.int64(-7))) == -7.0  # integers convert first
    with pytest.raises(InvalidInputError):
        f(True)


@given(xs=st.lists(float32_values() | st.just(NAN), min_size=1, max_size=12))
def test_half_up_float32_matches_reference(xs):
    ref, fn = getattr(reference, H32), getattr(floatconv, H32)
    got = fn(np.array(xs, dtype=np.float32))
    assert got.dtype == np.float32
    assert all(_same(g, ref(v)) for g, v in zip(got.tolist(), xs, strict=True))
    assert _same(float(fn(np.float32(xs[0]))), ref(xs[0]))


@given(xs=st.lists(float32_values(), min_size=1, max_size=12))
def test_half_up_equals_the_former_backend_copies(xs):
    """NVDLA's ``floor(x + np.float32(0.5))`` on float32 data."""
    x = np.array(xs, dtype=np.float32)
    assert getattr(floatconv, H32)(x).tolist() == np.floor(x + np.float32(0.5)).tolist()


def test_half_up_float32_special_values():
    xs = [*_special(np.float32), float(np.float32(0.49999997)), -0.49999997]
    x = np.array(xs, dtype=np.float32)
    ref = getattr(reference, H32)
    assert getattr(floatconv, H32)(x).tolist() == [ref(float(v)) for v in x]
    assert getattr(floatconv, H32)(np.array([0.49999997, -2.5], np.float32)).tolist() == [1, -2]
    with pytest.raises(InvalidInputError, match="float32"):
        getattr(floatconv, H32)(np.array([0.1]))  # a float64 that is no float32
