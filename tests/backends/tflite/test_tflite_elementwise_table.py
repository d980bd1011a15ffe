"""ADD, SUB and MUL by table lookup equal the direct arithmetic and the Python-int reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.tflite import elementwise, reference
from quantemu.backends.tflite.elementwise_params import add_params, mul_params, sub_params
from quantemu.errors import UnsupportedError
from tests.backends.tflite.strategies import activations, codes, scales, zero_points
from tests.backends.tflite.test_elementwise import SHAPE_PAIRS, _scalar_map


def _both(kernel, a, b, p, monkeypatch):
    monkeypatch.setattr(elementwise, "TABLE_MIN_SIZE", 0)
    by_table = kernel(a, b, p)
    monkeypatch.setattr(elementwise, "TABLE_MIN_SIZE", 2**62)
    direct = kernel(a, b, p)
    return by_table, direct


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SHAPE_PAIRS), st.sampled_from(["add", "sub", "mul"]), st.data())
def test_table_equals_direct_and_reference(shapes, op, data):
    a, b = data.draw(codes(shapes[0])), data.draw(codes(shapes[1]))
    out_scale = scales(2.0**-16) if op == "mul" else scales()
    args = [data.draw(s) for s in (scales(), zero_points, scales(), zero_points, out_scale)]
    build = {"add": add_params, "sub": sub_params, "mul": mul_params}[op]
    try:
        p = build(*args, data.draw(zero_points), data.draw(activations))
    except UnsupportedError:
        return
    kernel = elementwise.mul if op == "mul" else elementwise.add
    with pytest.MonkeyPatch.context() as mp:
        (y_t, c_t), (y_d, c_d) = _both(kernel, a, b, p, mp)
    assert y_t.dtype == y_d.dtype == np.int8
    assert y_t.shape == y_d.shape and np.array_equal(y_t, y_d) and c_t == c_d
    ref = reference.mul if op == "mul" else reference.add
    assert np.array_equal(y_t, _scalar_map(ref, a, b, p))


def test_table_counts_values_landing_on_a_bound(monkeypatch):
    # ReLU (act_min = z_out): sums of exactly zero land on act_min unclamped.
    p = add_params(0.5, 0, 0.5, 0, 1.0, -128, "RELU")
    a = np.array([1, -1, -5, 3] * 5000, np.int8)
    b = np.array([-1, 1, 2, -7] * 5000, np.int8)
    with pytest.MonkeyPatch.context() as mp:
        (y_t, c_t), (y_d, c_d) = _both(elementwise.add, a, b, p, mp)
    assert np.array_equal(y_t, y_d) and c_t == c_d
