"""Saturation and wrapping against the Python-int references, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import reference, saturation
from tests.intmath.strategies import (
    apply_reference,
    assert_matches,
    fits_int64,
    int_operands,
)

CLAMPS = ["saturate", "saturate_symmetric", "saturate_unsigned"]
ALL = [*CLAMPS, *(f"{n}_count" for n in CLAMPS), "wrap", "wrap_unsigned"]

#: Widths where something changes: 1, byte and word sizes and their neighbours, 63, 64.
WIDTHS = st.one_of(
    st.sampled_from([1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 62, 63, 64]), st.integers(1, 64)
)


@pytest.mark.parametrize("name", [*CLAMPS, "wrap"])
@given(x=int_operands(), bits=WIDTHS)
def test_matches_reference(name, x, bits):
    expected = apply_reference(getattr(reference, name), x, bits=bits)
    got = getattr(saturation, name)(x, bits)
    assert_matches(got, expected, object_result=not fits_int64(x))


@given(x=int_operands(), bits=WIDTHS)
def test_wrap_unsigned(x, bits):
    expected = apply_reference(reference.wrap_unsigned, x, bits=bits)
    got = saturation.wrap_unsigned(x, bits)
    assert_matches(got, expected, object_result=bits == 64 or not fits_int64(x))


@pytest.mark.parametrize("name", CLAMPS)
@given(x=int_operands(), bits=WIDTHS)
def test_count_variants(name, x, bits):
    ref = getattr(reference, f"{name}_count")
    got, n = getattr(saturation, f"{name}_count")(x, bits)
    assert type(n) is int
    if isinstance(x, np.ndarray):
        pairs = [ref(int(v), bits) for v in x.ravel()]
        assert got.tolist() == [y for y, _ in pairs]
        assert n == sum(c for _, c in pairs)
    else:
        assert (got, n) == ref(int(x), bits)


def test_hand_examples():
    x = np.array([-(2**63), -129, -128, -127, 127, 128, 2**63 - 1])
    assert saturation.saturate(x, 8).tolist() == [-128, -128, -128, -127, 127, 127, 127]
    assert saturation.saturate_symmetric(x, 8).tolist() == [-127, -127, -127, -127, 127, 127, 127]
    assert saturation.saturate_unsigned(x, 8).tolist() == [0, 0, 0, 0, 127, 128, 255]
    assert saturation.saturate_unsigned(x, 64).tolist() == [0, 0, 0, 0, 127, 128, 2**63 - 1]
    assert saturation.saturate_symmetric_count(x, 8)[1] == 5  # -128 counts: it becomes -127
    assert saturation.wrap(x, 8).tolist() == [0, 127, -128, -127, 127, -128, -1]
    assert saturation.wrap(x, 64).tolist() == x.tolist()
    assert saturation.wrap_unsigned(x, 8).tolist() == [0, 127, 128, 129, 127, 128, 255]
    assert saturation.wrap_unsigned(x, 64).tolist() == [
        2**63,
        2**64 - 129,
        2**64 - 128,
        2**64 - 127,
        127,
        128,
        2**63 - 1,
    ]


def test_empty_and_shapes():
    x = np.zeros((2, 0), dtype=np.int32)
    assert saturation.saturate(x, 8).shape == (2, 0)
    y, n = saturation.saturate_count(x, 8)
    assert y.shape == (2, 0) and n == 0
    m = np.arange(-6, 6).reshape(3, 4) * 100
    assert saturation.saturate(m, 8).shape == (3, 4)
    assert saturation.wrap(m, 8).tolist() == reference_2d(reference.wrap, m, 8)


def reference_2d(fn, m, bits):
    return [[fn(int(v), bits) for v in row] for row in m]


def test_does_not_modify_input():
    x = np.array([300, -300])
    for name in ALL:
        getattr(saturation, name)(x, 8)
    assert x.tolist() == [300, -300]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("bits", [0, 65, -1, 8.0, True, None])
def test_bad_bits(name, bits):
    with pytest.raises(InvalidInputError, match=rf"{name}: bits"):
        getattr(saturation, name)(np.array([1]), bits)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("x", [1.0, np.array([1.5]), True, np.array([True]), "3"])
def test_non_integer_x(name, x):
    with pytest.raises(InvalidInputError, match=rf"{name}: x must be integers"):
        getattr(saturation, name)(x, 8)
