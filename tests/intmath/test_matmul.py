"""The exact integer GEMM against naive Python-int dot products, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import matmul, reference
from tests.strategies import boundary_ints

F32_EXACT, F64_EXACT = 2**24, 2**53


def _ref(a: np.ndarray, b: np.ndarray) -> list:
    """Batched reference: the 2-D reference over broadcast batch axes, as nested lists."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(np.asarray(a, dtype=object), (*batch, *a.shape[-2:]))
    b = np.broadcast_to(np.asarray(b, dtype=object), (*batch, *b.shape[-2:]))
    out = [
        reference.matmul_exact(x.tolist(), y.tolist())
        for x, y in zip(a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:]), strict=True)
    ]
    result = np.empty((len(out), a.shape[-2], b.shape[-1]), dtype=object)
    for i, o in enumerate(out):
        for m, row in enumerate(o):
            result[i, m, :] = row
    return result.reshape(*batch, a.shape[-2], b.shape[-1]).tolist()


def _check(a, b, **kw):
    got = matmul.matmul_exact(a, b, **kw)
    want = _ref(np.asarray(a), np.asarray(b))
    assert got.tolist() == want
    big = any(abs(v) > 2**63 - 1 for v in np.asarray(want, dtype=object).ravel())
    if big:  # beyond int64: Python ints (int64 is the dtype whenever the bound allows it)
        assert got.dtype == object


@st.composite
def operands(draw, max_value, dtype=np.int64):
    """``(a, b)`` of shapes ``(M, K)``, ``(K, N)`` (or batched) with boundary-biased values."""
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    lead = draw(st.sampled_from([(), (2,)]))
    elems = boundary_ints(-max_value, max_value)
    a = draw(st.lists(elems, min_size=m * k, max_size=m * k))
    b = draw(
        st.lists(
            elems,
            min_size=k * n * max(1, int(np.prod(lead))),
            max_size=k * n * max(1, int(np.prod(lead))),
        )
    )
    dt = dtype if max_value < 2**63 else object
    return np.array(a, dtype=dt).reshape(m, k), np.array(b, dtype=dt).reshape(*lead, k, n)


@given(data=st.data(), cap=st.sampled_from([1, 127, 128, 255, 2**12, 2**26, 2**31, 2**40, 2**62]))
def test_matches_reference(data, cap):
    _check(*data.draw(operands(cap)))


@given(data=st.data())
def test_python_ints_beyond_int64(data):
    _check(*data.draw(operands(2**80)))


@given(data=st.data(), cap=st.sampled_from([127, 255, 2**12]))
def test_float_operands_holding_integers(data, cap):
    a, b = data.draw(operands(cap))
    for ta, tb in ((np.float32, np.float32), (np.float64, np.int8 if cap == 127 else np.int64)):
        got = matmul.matmul_exact(a.astype(ta), b.astype(tb))
        assert got.dtype == np.int64 and got.tolist() == _ref(a, b)


@pytest.mark.parametrize(
    "edge",
    [
        F32_EXACT - 1,
        F32_EXACT,
        F32_EXACT + 1,
        F64_EXACT - 1,
        F64_EXACT,
        F64_EXACT + 1,
        2**63 - 1,
        2**63,
    ],
)
@pytest.mark.parametrize("k", [1, 2, 3, 64, 97])
def test_operands_at_the_bounds(edge, k):
    """Sums at, just below and just above each threshold (2**24, 2**53, int64)."""
    a_val = 1 << ((edge.bit_length() - 1) // 2)
    b_col = edge // a_val
    q, r = divmod(b_col, k)
    col = [q + (i < r) for i in range(k)]  # a column summing to b_col exactly
    a = np.array([[a_val] * k, [-a_val] * k, [a_val - 1] * k, [1] * k], dtype=object)
    b = np.array([[c, -c, 1] for c in col], dtype=object)
    last = a_val * b_col
    for aa, bb in ((a, b), (a.astype(np.int64), b.astype(np.int64))) if last < 2**63 else ((a, b),):
        got = matmul.matmul_exact(aa, bb)
        assert got.tolist() == _ref(a, b)
        assert got[0, 0] == last


def test_long_reductions_take_float32_runs():
    """A reduction whose total is far beyond 2**24 but whose 32-row blocks are not: cut into
    float32 runs, exact; then cached for a read-only operand."""
    rng = np.random.default_rng(7)
    a = rng.integers(200, 256, (17, 5003)).astype(np.uint8)
    b = rng.integers(90, 128, (5003, 9)).astype(np.int8)
    b[::5] *= -1
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert np.abs(want).max() > 2**26
    assert np.array_equal(matmul.matmul_exact(a, b), want)
    b.setflags(write=False)
    assert np.array_equal(matmul.matmul_exact(a, b), want)
    assert np.array_equal(matmul.matmul_exact(a, b), want)  # the cached plan
    assert np.array_equal(matmul.matmul_exact(a.astype(np.float32), b, a_max=255), want)


def test_zero_and_empty():
    assert matmul.matmul_exact(np.zeros((2, 3)), np.ones((3, 4))).tolist() == [[0] * 4] * 2
    assert matmul.matmul_exact(np.ones((2, 0), np.int64), np.ones((0, 3), np.int64)).shape == (2, 3)
    huge = np.array([[2**200]], dtype=object)
    assert matmul.matmul_exact(huge, np.zeros((1, 1), np.int64)).tolist() == [[0]]


def test_errors():
    with pytest.raises(InvalidInputError, match="inner dimensions"):
        matmul.matmul_exact(np.ones((2, 3), np.int64), np.ones((2, 3), np.int64))
    with pytest.raises(InvalidInputError, match="at least 2 dimensions"):
        matmul.matmul_exact(np.ones(3, np.int64), np.ones((3, 1), np.int64))
    with pytest.raises(InvalidInputError, match="integers"):
        matmul.matmul_exact(np.ones((1, 1), bool), np.ones((1, 1), np.int64))


def test_b_max_skips_the_scan_and_gives_the_same_product():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (5, 3000)).astype(np.float32)
    b = rng.integers(-128, 128, (3000, 4)).astype(np.float32)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    assert (matmul.matmul_exact(a, b, a_max=128, b_max=128) == expected).all()
    assert (matmul.matmul_exact(a, b, a_max=128) == expected).all()


def test_plans_are_cached_for_read_only_views_of_read_only_weights_only():
    from quantemu.intmath.matmul import ArrayCache

    cache, made = ArrayCache(), []
    w = np.arange(12.0).reshape(3, 4).copy()  # owns its data
    w.setflags(write=False)
    for _ in range(2):
        cache.get(w.T, "k", lambda: made.append("frozen") or 1)
    writeable = np.arange(12.0).reshape(3, 4)
    for _ in range(2):
        cache.get(writeable.T, "k", lambda: made.append("writeable") or 1)
    assert made == ["frozen", "writeable", "writeable"]
