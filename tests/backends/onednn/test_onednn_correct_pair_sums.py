"""``correct_pair_sums`` (the exact product corrected on the risky pairs, reading the dense 8-bit
columns) equals ``pair_sum_matmul`` (the sequential s16 pair-saturating definition)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn.pairsum import correct_pair_sums, pair_sum_matmul


@settings(max_examples=80, deadline=None)
@given(
    g=st.integers(1, 2),
    m=st.integers(1, 9),
    k=st.integers(1, 12),
    n=st.integers(1, 6),
    unsigned=st.booleans(),
    seed=st.integers(0, 2**16),
    int32=st.booleans(),
)
def test_corrected_product_equals_the_pair_saturating_one(  # noqa: PLR0917 (hypothesis draws)
    g, m, k, n, unsigned, seed, int32
):
    rng = np.random.default_rng(seed)
    lo, hi, dtype = (0, 256, np.uint8) if unsigned else (-128, 128, np.int8)
    cols_t = np.ascontiguousarray(rng.integers(lo, hi, (g, k, m)).astype(dtype))
    length = k + (k % 2) + 2 * int(rng.integers(0, 2))  # even, maybe with padding slots
    slots = rng.permutation(np.resize(np.arange(k), length))
    b = rng.integers(-128, 128, (g, length, n)).astype(np.int64)
    b[:, k:, :] = 0  # padding slots carry weight 0 (their row is any row)
    slots[k:] = 0
    a = cols_t[:, slots].transpose(0, 2, 1).astype(np.int64)
    want = pair_sum_matmul(a, b)
    acc = np.einsum("gkm,gkn->gmn", a.transpose(0, 2, 1), b)
    acc = acc.astype(np.int32) if int32 else acc
    saturated, _ = correct_pair_sums(acc, cols_t, slots, b)
    assert np.array_equal(acc, want.acc)
    assert saturated == want.saturated_pairs


def test_pairs_that_saturate_are_corrected():
    cols_t = np.full((1, 4, 3), 255, np.uint8)  # every pair sums to 2 * 255 * 127 > 32767
    slots = np.arange(4)
    b = np.full((1, 4, 2), 127, np.int64)
    acc = np.full((1, 3, 2), 4 * 255 * 127, np.int64)
    saturated, risky = correct_pair_sums(acc, cols_t, slots, b)
    assert saturated == 3 * 2 * 2 and risky >= 2  # every (output, pair) sum clamps
    assert np.array_equal(acc, np.full((1, 3, 2), 2 * 32767))
