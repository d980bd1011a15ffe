"""accumulate / accumulate_count against the sequential Python-int reference, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import reference
from quantemu.intmath.accumulate import accumulate, accumulate_count
from quantemu.intmath.policies import Bounds, Granularity

GRANULARITIES = list(Granularity)


def _near_rails(bits: int) -> st.SearchStrategy[int]:
    """Values at and around the rails and zero: where order and granularity matter."""
    hi = 2 ** (bits - 1) - 1
    lo = -(2 ** (bits - 1))
    anchors = st.sampled_from([0, hi, lo, hi // 2, lo // 2, 1, -1])
    return st.builds(lambda a, d: a + d, anchors, st.integers(-300, 300)) | st.integers(lo, hi)


@st.composite
def cases(draw, max_bits=64):
    bits = draw(st.sampled_from([8, 16, 24, 32, 48, 62, 63, 64])) if max_bits == 64 else max_bits
    granularity = draw(st.sampled_from(GRANULARITIES))
    chunk = draw(st.integers(1, 5)) if granularity is Granularity.PER_CHUNK else None
    bounds = draw(st.sampled_from(list(Bounds)))
    k = draw(st.integers(0, 12))
    pmag = draw(st.sampled_from([2**7, 2**14, 2 ** (bits - 2), 2 ** (bits + 3)]))
    rows = draw(st.integers(1, 4))
    products = [[draw(st.integers(-pmag, pmag)) for _ in range(k)] for _ in range(rows)]
    inits = [draw(_near_rails(bits)) for _ in range(rows)]
    return bits, granularity, chunk, bounds, products, inits


def _reference_rows(case):
    bits, granularity, chunk, bounds, products, inits = case
    return [
        reference.accumulate(
            row, bits=bits, granularity=granularity, chunk=chunk, init=init, bounds=bounds
        )
        for row, init in zip(products, inits, strict=True)
    ]


def _as_array(rows, k):
    values = [v for row in rows for v in row]
    fits = all(-(2**63) <= v < 2**63 for v in values)
    return np.array(rows, dtype=np.int64 if fits else object).reshape(len(rows), k)


@given(cases())
def test_matches_reference(case):
    bits, granularity, chunk, bounds, products, inits = case
    k = len(products[0])
    p = _as_array(products, k)
    init = np.array(inits, dtype=object)
    acc, sat = accumulate_count(
        p, bits=bits, granularity=granularity, chunk=chunk, init=init, bounds=bounds
    )
    expected = _reference_rows(case)
    assert [int(v) for v in acc] == [e[0] for e in expected]
    assert [bool(v) for v in sat] == [e[1] for e in expected]


@given(cases(max_bits=32))
def test_int32_rails_scalar_calls(case):
    bits, granularity, chunk, bounds, products, inits = case
    for row, init in zip(products, inits, strict=True):
        got = accumulate_count(
            row, bits=bits, granularity=granularity, chunk=chunk, init=init, bounds=bounds
        )
        want = reference.accumulate(
            row, bits=bits, granularity=granularity, chunk=chunk, init=init, bounds=bounds
        )
        assert got == want
        assert isinstance(got[0], int)


def test_order_matters_xs3_example():
    # bias near +rail; a chunk crosses the rail and the next comes back: 2**31-1 - 10 + 20
    # clamps to 2**31-1, then -20 gives 2**31-21. Exact end-of-sum clamping gives 2**31-11.
    hi = 2**31 - 1
    products = np.array([20, -20])
    per_product = accumulate(
        products,
        bits=32,
        granularity=Granularity.PER_PRODUCT,
        init=hi - 10,
        bounds=Bounds.SYMMETRIC,
    )
    at_end = accumulate(
        products, bits=32, granularity=Granularity.AT_END, init=hi - 10, bounds=Bounds.SYMMETRIC
    )
    assert per_product == hi - 20
    assert at_end == hi - 10


def test_axis_and_broadcast_init():
    rng = np.random.default_rng(0)
    p = rng.integers(-(2**14), 2**14, size=(5, 70, 3))
    init = np.array([2**31 - 5000, -(2**31) + 7, 0])
    got = accumulate(
        p,
        bits=32,
        granularity=Granularity.PER_CHUNK,
        chunk=32,
        init=init,
        axis=1,
        bounds=Bounds.SYMMETRIC,
    )
    assert got.shape == (5, 3)
    for a in range(5):
        for c in range(3):
            want, _ = reference.accumulate(
                [int(v) for v in p[a, :, c]],
                bits=32,
                granularity=Granularity.PER_CHUNK,
                chunk=32,
                init=int(init[c]),
                bounds=Bounds.SYMMETRIC,
            )
            assert got[a, c] == want


def test_long_reduction_with_crossings():
    # Many steps (exercises the tree composition with padding to a power of two).
    rng = np.random.default_rng(1)
    p = rng.integers(-(2**20), 2**20, size=(3, 1100))
    init = np.array([2**47 - 2**22, -(2**47) + 2**22, 0])
    acc, sat = accumulate_count(p, bits=48, granularity=Granularity.PER_PRODUCT, init=init)
    for r in range(3):
        want = reference.accumulate(
            [int(v) for v in p[r]],
            bits=48,
            granularity=Granularity.PER_PRODUCT,
            init=int(init[r]),
        )
        assert (int(acc[r]), bool(sat[r])) == want


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"granularity": Granularity.PER_CHUNK}, "chunk"),
        ({"granularity": Granularity.PER_CHUNK, "chunk": 0}, "positive int"),
        ({"granularity": Granularity.AT_END, "chunk": 4}, "only applies"),
        ({"granularity": "per_product"}, "Granularity"),
        ({"granularity": Granularity.AT_END, "bits": 65}, "bits"),
    ],
)
def test_errors(kwargs, match):
    kwargs = {"bits": 32, **kwargs}
    with pytest.raises(InvalidInputError, match=match):
        accumulate(np.array([1, 2, 3]), **kwargs)


def test_rejects_float_products_and_scalars():
    with pytest.raises(InvalidInputError, match="integers"):
        accumulate(np.array([1.0, 2.0]), bits=32, granularity=Granularity.AT_END)
    with pytest.raises(InvalidInputError, match="reduction axis"):
        accumulate(5, bits=32, granularity=Granularity.AT_END)
    with pytest.raises(InvalidInputError, match="broadcast"):
        accumulate(
            np.zeros((2, 3), dtype=np.int64),
            bits=32,
            granularity=Granularity.AT_END,
            init=np.zeros(5, dtype=np.int64),
        )
