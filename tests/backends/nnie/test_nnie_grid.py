"""The exact grid tables of the NNIE backend, checked against independent computations."""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from quantemu.backends.nnie import grid


def _keys(values: np.ndarray) -> np.ndarray:
    keys, nans = grid.grid_keys(np.ascontiguousarray(values, np.float32).view(np.uint32))
    assert nans.size == 0
    return keys


def test_key_fields_match_log2_at_every_threshold():
    # Every distinct threshold t and the float32 just below it: F and exactness from the key must
    # equal floor(32*log2) in float64 (exact enough for float32 inputs: nnie.md §3.2).
    finite = grid.THRESHOLDS[grid.THRESHOLDS < grid.F32_INF_BITS].astype(np.uint32)
    bits = np.concatenate([finite, finite[finite > 1] - 1])
    x = bits.view(np.float32)
    t = 32.0 * np.log2(x.astype(np.float64))
    keys = _keys(x)
    assert np.all(keys < grid.N_MAG)  # positive block
    np.testing.assert_array_equal(grid.KEY_F[keys], np.floor(t).astype(np.int64))
    np.testing.assert_array_equal(grid.KEY_EXACT[keys], t == np.floor(t))


def test_keys_agree_with_searchsorted_on_random_patterns():
    # The bucket tables (one threshold per normal bucket) against a direct exact search.
    rng = np.random.default_rng(6)
    bits = rng.integers(0, 0x7F800001, 200_000, dtype=np.uint32)
    bits[:1000] = rng.integers(0, 1 << 23, 1000, dtype=np.uint32)  # subnormals and zero
    bits |= rng.integers(0, 2, bits.size, dtype=np.uint32) << 31
    keys, _ = grid.grid_keys(bits.copy())
    mag = (bits & 0x7FFFFFFF).astype(np.int64)
    km = np.searchsorted(grid.THRESHOLDS, mag, side="right")
    want = np.where(mag == 0, grid.KEY_ZERO, (bits >> 31).astype(np.int64) * grid.N_MAG + km - 1)
    np.testing.assert_array_equal(keys, want)


def test_special_keys():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45], np.float32)
    keys = _keys(x)
    assert keys[0] == keys[1] == grid.KEY_ZERO
    assert keys[2] == grid.N_MAG - 1 and keys[3] == 2 * grid.N_MAG - 1
    assert grid.KEY_F[keys[2]] == grid.F_INF
    # 2^-149 is exactly a power of two: F = -4768, exact.
    assert grid.KEY_F[keys[4]] == -4768 and grid.KEY_EXACT[keys[4]]
    assert keys[5] == keys[4] + grid.N_MAG


def test_nan_indices_are_reported():
    bits = np.array([0x7FC00000, 0x3F800000, 0xFFFFFFFF, 0x7F800001], np.uint32)
    _, nans = grid.grid_keys(bits)
    np.testing.assert_array_equal(nans, [0, 2, 3])


def _first_float32_at_least_exact(h: int, strict: bool) -> int:
    """Independent: smallest float32 t with t^32 >= 2^h (or >), by bisection on bit patterns."""

    def ok(b: int) -> bool:
        t = Fraction(float(np.uint32(b).view(np.float32)))
        p = Fraction(2) ** h
        return t**32 > p if strict else t**32 >= p

    lo, hi = 0, grid.F32_INF_BITS  # ok(hi) treated as true (inf is above every point)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@pytest.mark.parametrize(
    "h", [0, 1, 31, 32, -1, -33, -4768, -4767, -4769, -4100, -4050, -4030, 4095, 4096, -5000]
)
def test_first_float32_at_least_against_fractions(h):
    for strict in (False, True):
        got = int(grid.first_float32_at_least(np.array([h]), strict=strict)[0])
        assert got == _first_float32_at_least_exact(h, strict), (h, strict)


def test_float32_levels_equal_float64_exp2_cast_in_the_page_range():
    # nnie.md §4: for i+z in [-2700, 2369], f32(exp2 in float64) is the correctly rounded value;
    # outside, 0 or inf either way.
    n = np.arange(-2800, 2500)
    with np.errstate(over="ignore"):
        want = np.exp2(n / 16.0).astype(np.float32)
    np.testing.assert_array_equal(grid.float32_levels(n).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("n", [-2399, -2385, -2384, -2383, -2000, -2015, -2016, -1, 1, 7, 2047])
def test_float32_levels_are_nearest(n):
    # The float32 neighbours of the level straddle the exact value, the level being the nearer.
    level = grid.float32_levels(np.array([n]))[0]
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(2) ** (Decimal(n) / 16)
        below = Decimal(float(np.nextafter(level, np.float32(0))))
        above = Decimal(float(np.nextafter(level, np.float32(np.inf))))
        here = Decimal(float(level))
        assert abs(here - exact) < abs(below - exact)
        assert abs(here - exact) < abs(above - exact)


def test_float32_levels_tie_and_extremes():
    # 2^-150 is exactly half the smallest subnormal: ties to even give 0.
    out = grid.float32_levels(np.array([-2400, -2401, -2384, 2048, 3000]))
    assert out.tolist() == [0.0, 0.0, 2.0**-149, np.inf, np.inf]


def test_float64_pow2_16th_is_nearest():
    ks = np.array([-16352, -1889, -100, -1, 1, 15, 20, 21, 999, 2047, 16383])
    values = grid.float64_pow2_16th(ks)
    for k, c in zip(ks.tolist(), values.tolist(), strict=True):
        exact = Fraction(2) ** k  # compare c^16 with 2^k, and the half-ulp neighbours likewise
        ulp = Fraction(np.spacing(c))
        lo, hi = Fraction(c) - ulp / 2, Fraction(c) + ulp / 2
        assert lo**16 < exact < hi**16, k


def test_float64_pow2_16th_range_error():
    with pytest.raises(ValueError, match="outside"):
        grid.float64_pow2_16th(np.array([16384]))
