"""ADD, SUB and MUL against the scalar reference, with ==, broadcasting included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import elementwise, reference
from quantemu.backends.tflite.elementwise_params import add_params, mul_params, sub_params
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.backends.tflite.strategies import activations, codes, scales, zero_points

SHAPE_PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (1, 3, 1)), ((1, 1, 4), (2, 3, 4)), ((5,), (1,))]


def _scalar_map(f, a, b, p):
    a2, b2 = np.broadcast_arrays(a, b)
    return np.array(
        [f(int(u), int(v), p) for u, v in zip(a2.ravel(), b2.ravel(), strict=True)]
    ).reshape(a2.shape)


@st.composite
def operands(draw):
    sa, sb = draw(st.sampled_from(SHAPE_PAIRS))
    return draw(codes(sa)), draw(codes(sb))


@given(operands(), st.sampled_from(["add", "sub"]), st.data())
def test_add_sub_match_reference(xy, op, data):
    a, b = xy
    build = add_params if op == "add" else sub_params
    args = [
        data.draw(s) for s in (scales(), zero_points, scales(), zero_points, scales(), zero_points)
    ]
    try:
        p = build(*args, data.draw(activations))
    except UnsupportedError:  # s_out too small for a SmallerThanOne output multiplier
        return
    y, _ = elementwise.add(a, b, p)
    assert np.array_equal(y, _scalar_map(reference.add, a, b, p))


@given(operands(), st.data())
def test_mul_matches_reference(xy, data):
    a, b = xy
    args = [
        data.draw(s)
        for s in (scales(), zero_points, scales(), zero_points, scales(2.0**-16), zero_points)
    ]
    p = mul_params(*args, data.draw(activations))
    y, _ = elementwise.mul(a, b, p)
    assert np.array_equal(y, _scalar_map(reference.mul, a, b, p))


def test_sub_tie_is_subtracted_not_negated():
    # Scales where SRDHM(x, -m) and -SRDHM(x, m) differ for the pair (4, -112): both peers
    # (LiteRT BUILTIN_REF, TFLite-Micro) give 118, the subtraction; negating m would give 119.
    p = sub_params(0.05610644072294235, 3, 0.030149180442094803, -5, 0.025344161316752434, -11)
    y, _ = elementwise.add(np.array([4]), np.array([-112]), p)
    assert y.tolist() == [118]


def test_add_rejects_shapes_that_do_not_broadcast():
    p = add_params(0.5, 0, 0.5, 0, 0.5, 0)
    with pytest.raises(InvalidInputError, match="broadcast"):
        elementwise.add(np.zeros(3, np.int8), np.zeros(2, np.int8), p)
