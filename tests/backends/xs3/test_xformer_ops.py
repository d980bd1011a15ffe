"""XC_add, XC_lookup and XC_mean: the vectorized kernels against their scalar twins, and the
compile-time parameters on hand-checked cases."""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import signed_ints

from quantemu.backends.xs3.xformer import reference as ref
from quantemu.backends.xs3.xformer.add import XcAddParams, add_elementwise_int8, xc_add_params
from quantemu.backends.xs3.xformer.lookup import c_round_half_away, lookup8, lookup_table_int8
from quantemu.backends.xs3.xformer.mean import (
    mean_int8,
    round_half_away_float,
    xc_mean_params,
)
from quantemu.errors import InvalidInputError, UnsupportedError

I8 = signed_ints(8)
ZP = st.integers(-128, 127)
# scales as TFLite stores them (float32), over a few decades
SCALE = st.floats(-12, 2).map(lambda e: float(np.float32(2.0**e)))
CODES = st.lists(I8, min_size=1, max_size=40)


@given(SCALE, ZP, SCALE, ZP, SCALE, ZP, st.booleans(), CODES, CODES)
def test_xc_add_matches_reference(s1, z1, s2, z2, so, zo, sub, a, b):  # noqa: PLR0917
    try:
        p = xc_add_params(s1, z1, s2, z2, so, zo, subtract=sub)
    except UnsupportedError:
        return  # scales more than 2**13 apart: refused, not emulated
    n = min(len(a), len(b))
    x1, x2 = np.array(a[:n]), np.array(b[:n])
    got = add_elementwise_int8(x1, x2, p)
    want = [
        ref.add_elementwise(u, v, p.m1, p.m2, p.bias, p.shift)
        for u, v in zip(a[:n], b[:n], strict=True)
    ]
    assert got.tolist() == want


@given(signed_ints(16), signed_ints(16), st.integers(-(2**24), 2**24), st.integers(1, 16), I8, I8)
def test_add_kernel_matches_reference_on_raw_parameters(m1, m2, bias, shift, u, v):  # noqa: PLR0917
    p = XcAddParams(m1=m1, m2=m2, bias=bias, shift=shift)
    got = add_elementwise_int8(np.array([u]), np.array([v]), p)
    assert int(got[0]) == ref.add_elementwise(u, v, m1, m2, bias, shift)


def test_xc_add_parameters_by_hand():
    # r1 = 0.75, r2 = 1.5: shift = floor(log2(2**14 / 1.5)) = 13
    p = xc_add_params(0.75, 3, 1.5, -2, 1.0, 5)
    assert p == XcAddParams(
        m1=6144, m2=12288, bias=round((5 - 3 * 0.75 + 2 * 1.5) * 8192), shift=13
    )
    # SUB negates m2 and the zero point's share in the bias
    q = xc_add_params(0.75, 3, 1.5, -2, 1.0, 5, subtract=True)
    assert (q.m2, q.bias) == (-12288, round((5 - 3 * 0.75 - 2 * 1.5) * 8192))
    # the whole broadcast: a (1, C) row against (N, C)
    y = add_elementwise_int8(np.zeros((2, 3), np.int8), np.array([[1, 2, 3]], np.int8), p)
    assert y.shape == (2, 3)


def test_xc_add_refuses_scales_far_apart():
    with pytest.raises(UnsupportedError, match="2\\*\\*13"):
        xc_add_params(1.0, 0, 1.0, 0, 1e-5, 0)


def test_xc_add_rejects_non_int8_codes():
    with pytest.raises(InvalidInputError, match="x1"):
        add_elementwise_int8(np.array([300]), np.array([0]), XcAddParams(1, 1, 0, 1))


@given(st.lists(I8, min_size=256, max_size=256), CODES)
def test_lookup8_matches_reference(entries, codes):
    table = np.array(entries, np.int8)
    got = lookup8(np.array(codes, np.int8), table)
    assert got.tolist() == [ref.lookup8(c, table) for c in codes]


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_c_round_is_round_half_away(v):
    want = decimal.Decimal(v).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
    assert c_round_half_away(v) == float(want)


@given(st.floats(-200, 200, width=32))
def test_roundf_is_round_half_away(v):
    assert float(round_half_away_float(np.float32([v]))[0]) == c_round_half_away(v)


def test_tables_by_hand():
    s = 2.0**-4  # x = q / 16
    relu6 = lookup_table_int8("relu6", s, 0, s, 0)
    assert [int(relu6[q & 0xFF]) for q in (-5, 0, 50, 96, 127)] == [0, 0, 50, 96, 96]
    tanh = lookup_table_int8("tanh", s, 0, 1 / 128, 0)
    assert int(tanh[16]) == round(math.tanh(1.0) * 128)  # 97.48...: 97
    leaky = lookup_table_int8("leaky_relu", 1.0, 0, 1.0, 0, alpha=0.25)
    assert [int(leaky[q & 0xFF]) for q in (-128, -6, -2, 3)] == [-32, -2, -1, 3]  # -1.5 -> -2
    ident = lookup_table_int8("identity", 0.5, 10, 0.25, -3)
    assert int(ident[20]) == (20 - 10) * 2 - 3


def test_lookup_rejects_an_unknown_kind():
    with pytest.raises(UnsupportedError, match="elu"):
        lookup_table_int8("elu", 1.0, 0, 1.0, 0)


@given(
    st.lists(st.lists(I8, min_size=1, max_size=20), min_size=1, max_size=4).filter(
        lambda rows: len({len(r) for r in rows}) == 1
    ),
    SCALE,
    ZP,
    SCALE,
    ZP,
)
def test_mean_matches_reference(rows, si, zi, so, zo):
    x = np.array(rows, np.int8)
    p = xc_mean_params(si, zi, so, zo, x.shape[1])
    got = mean_int8(x, (1,), False, p)
    f = (float(p.scale_mul), float(p.in_zero_point), float(p.out_zero_point))
    assert got.tolist() == [ref.mean_int8(r, *f) for r in rows]


def test_mean_parameters_and_axes():
    p = xc_mean_params(0.1, 3, 0.05, -7, 49)
    assert p.scale_mul == np.float32(float(np.float32(0.1)) / float(np.float32(0.05)) / 49.0)
    x = np.arange(-64, 64, dtype=np.int8).reshape(2, 4, 4, 4)
    a = mean_int8(x, (2, 3), True, p)
    b = mean_int8(x.transpose(0, 2, 3, 1), (1, 2), False, p)  # NHWC view: same sums
    assert a.shape == (2, 4, 1, 1) and np.array_equal(a[:, :, 0, 0], b)
