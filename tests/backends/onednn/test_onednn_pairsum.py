"""The fast pair-saturating GEMM against a dense evaluation of every pair, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn import pairsum
from quantemu.backends.onednn.pairsum import pair_sum_matmul, risky_pairs


def dense_pair_sums(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """Every pair of every output, saturated, summed: the definition, without the bound."""
    p = (
        a[:, :, 0::2, None].astype(np.int64) * b[:, None, 0::2, :]
        + a[:, :, 1::2, None].astype(np.int64) * b[:, None, 1::2, :]
    )  # (G, M, J, N)
    s = np.clip(p, -32768, 32767)
    return s.sum(axis=2), int(np.count_nonzero(s != p))


@st.composite
def operands(draw):
    g, m, j, n = (draw(st.integers(1, 3)) for _ in range(4))
    signed_a = draw(st.booleans())
    lo_a = -128 if signed_a else 0
    hi_a = 127 if signed_a else 255
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    a = rng.integers(lo_a, hi_a + 1, size=(g, m, 2 * j))
    if draw(st.booleans()):  # rails: most pairs saturate
        a = np.where(rng.random(a.shape) < 0.8, hi_a, a)
    b = rng.integers(-128, 128, size=(g, 2 * j, n))
    if draw(st.booleans()):
        b = np.where(rng.random(b.shape) < 0.7, rng.choice([-128, 127], size=b.shape), b)
    return a, b


@settings(max_examples=80)
@given(operands(), st.sampled_from([1, 3, 7, 1 << 21]), st.sampled_from([0, 5, 10**9]))
def test_pair_sum_matmul_matches_dense(ops, block, dense_ratio):
    a, b = ops
    old = pairsum._BLOCK_ELEMENTS, pairsum._DENSE_RATIO
    # small blocks exercise the block boundaries; ratio 0: never dense, 10**9: always dense
    pairsum._BLOCK_ELEMENTS, pairsum._DENSE_RATIO = block, dense_ratio
    try:
        got = pair_sum_matmul(a, b)
    finally:
        pairsum._BLOCK_ELEMENTS, pairsum._DENSE_RATIO = old
    want, saturated = dense_pair_sums(a, b)
    assert np.array_equal(got.acc, want)
    assert got.saturated_pairs == saturated


def test_narrow_activation_range_skips_every_pair():
    # u7 activations ([0, 127]) can never saturate: 127·128·2 = 32512 <= 32768
    rng = np.random.default_rng(1)
    a = rng.integers(0, 128, size=(1, 5, 8))
    b = rng.choice([-128, 127], size=(1, 8, 3))
    got = pair_sum_matmul(a, b)
    assert got.risky_pairs == 0
    assert np.array_equal(got.acc, dense_pair_sums(a, b)[0])


def test_bound_flags_only_same_sign_large_pairs():
    amin = np.zeros((1, 4), dtype=np.int64)
    amax = np.full((1, 4), 255)
    # column 0: (127, 127) risky, (127, -127) not; column 1: (64, 64) not (255·128 = 32640)
    b = np.array([[[127, 64], [127, 64], [127, 0], [-127, 0]]])
    gi, ni, ji = risky_pairs(amin, amax, b)
    assert (gi.tolist(), ni.tolist(), ji.tolist()) == ([0], [0], [0])
    # a signed operand in [-128, 127]: (127, -127) is still safe, (-128·-128)·2 = 32768 is not
    amin = np.full((1, 4), -128)
    amax = np.full((1, 4), 127)
    b = np.array([[[-128], [-128], [127], [-127]]])
    assert [v.tolist() for v in risky_pairs(amin, amax, b)] == [[0], [0], [0]]


def test_empty_operands():
    got = pair_sum_matmul(np.zeros((1, 0, 4), np.int64), np.zeros((1, 4, 2), np.int64))
    assert got.acc.shape == (1, 0, 2)
    got = pair_sum_matmul(np.zeros((1, 3, 0), np.int64), np.zeros((1, 0, 2), np.int64))
    assert got.acc.tolist() == [[[0, 0]] * 3]


@pytest.mark.parametrize("m", [1, 64])
def test_realistic_weights_have_few_risky_pairs(m):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(1, m, 256))
    b = np.clip(np.round(rng.normal(0, 20, size=(1, 256, 16))), -128, 127).astype(np.int64)
    got = pair_sum_matmul(a, b)
    assert got.risky_pairs < 0.05 * 128 * 16
    assert np.array_equal(got.acc, dense_pair_sums(a, b)[0])
