"""The int8 GEMM engine against the Python-int reference, with ==, and its fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.intmath import frozen, int8_engine, matmul, parallel, reference
from quantemu.intmath.int8_engine import GemmEngine

pytest.importorskip("onnxruntime")
ORT = GemmEngine.ORT
pytestmark = pytest.mark.skipif(
    not int8_engine.engine_works(ORT), reason="onnxruntime's MatMulInteger failed the self-check"
)

# What each activation kind may hold, and the a_max its callers pass.
A_KINDS = {
    "s8": (np.int8, -128, 127, None),
    "u8": (np.uint8, 0, 255, None),
    "f32 s8": (np.float32, -128, 127, 128),  # oneDNN's im2col columns
    "i16 s8": (np.int16, -128, 127, 128),  # XS3's windows
    "i16 offset": (np.int16, -255, 0, 255),  # TFLite's x - z, z = 127
    "f32 u8": (np.float32, 0, 255, 255),
}


def _values(rng, lo: int, hi: int, shape, mode: str) -> np.ndarray:
    """Uniform, only the rails, or rails mixed with uniform values."""
    if mode == "uniform":
        return rng.integers(lo, hi + 1, shape)
    rails = rng.choice(np.array([lo, hi]), shape)
    if mode == "rails":
        return rails
    return np.where(rng.random(shape) < 0.5, rails, rng.integers(lo, hi + 1, shape))


def _spy(monkeypatch) -> list:
    calls = []
    real = matmul.run

    def spy(plan, a, z, **kw):
        calls.append(z)
        return real(plan, a, z, **kw)

    monkeypatch.setattr(matmul, "run", spy)
    return calls


def _reference(a: np.ndarray, b: np.ndarray) -> list:
    return reference.matmul_exact(a.astype(np.int64).tolist(), b.astype(np.int64).tolist())


@st.composite
def gemms(draw):
    """``(a, frozen b, a_max)``: random shapes up to K = 3001, values uniform, on the rails, or
    mixed, for every activation kind, C-ordered or a strided view (rows reversed, or a
    transpose); weights s8, as int8 or as floats holding them."""
    m, n = draw(st.integers(1, 33)), draw(st.integers(1, 20))
    k = draw(st.sampled_from([1, 2, 7, 8, 64, 147, 577, 1152, 3001]))
    dtype, lo, hi, a_max = A_KINDS[draw(st.sampled_from(sorted(A_KINDS)))]
    mode = draw(st.sampled_from(["uniform", "rails", "mixed"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b_type = draw(st.sampled_from([np.int8, np.float32]))
    a = _values(rng, lo, hi, (m, k), mode).astype(dtype)
    layout = draw(st.sampled_from(["C", "rows reversed", "transposed"]))
    if layout == "rows reversed":
        a = a[::-1]
    elif layout == "transposed":
        a = np.ascontiguousarray(a.T).T  # columns contiguous, as NVDLA's im2col columns
    return a, frozen(_values(rng, -128, 127, (k, n), mode).astype(b_type)), a_max


@settings(max_examples=80, deadline=None)
@given(gemms())
def test_engine_matches_the_python_int_reference(case):
    a, b, a_max = case
    assert int8_engine.int8_plan(b, ORT) is not None
    assert int8_engine.zero_point(a, a_max) is not None  # so the engine computes it
    got = matmul.matmul_exact(a, b, a_max=a_max, engine=ORT)
    assert got.dtype == np.int64
    want = _reference(a, b)
    assert got.tolist() == want
    narrow = matmul.matmul_exact(a, b, a_max=a_max, engine=ORT, allow_int32=True)
    assert narrow.dtype == np.int32  # the s32 result, not widened
    assert narrow.tolist() == want


def test_engine_takes_the_gemm_and_batch_axes(monkeypatch):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (2, 3, 40, 300)).astype(np.int8)
    b = frozen(rng.integers(-128, 128, (300, 24)).astype(np.int8))
    got = matmul.matmul_exact(a[..., ::-1, :], b)  # a strided view: the engine copies it to u8
    want = np.matmul(a[..., ::-1, :].astype(np.int64), b.astype(np.int64))
    assert calls == [128] and got.shape == (2, 3, 40, 24) and np.array_equal(got, want)


@pytest.mark.parametrize(("av", "bv"), [(255, -128), (255, 127), (0, -128), (128, -128)])
def test_saturating_pairs_at_a_long_reduction(monkeypatch, av, bv):
    """u8 x s8 pairs that overflow int16 (x86 vpmaddubsw would saturate), K = 4608."""
    calls = _spy(monkeypatch)
    a = np.full((17, 4608), av, np.uint8)
    b = frozen(np.full((4608, 16), bv, np.int8))
    got = matmul.matmul_exact(a, b, engine=ORT)
    assert calls == [0] and (got == 4608 * av * bv).all()


def test_falls_back_when_the_s32_bound_fails(monkeypatch):
    """255 * 128 * K > 2**31 - 1 from K = 65794: the plan refuses, the float path answers."""
    calls = _spy(monkeypatch)
    k = 65794
    b = frozen(np.full((k, 2), -128, np.int8))
    assert int8_engine.int8_plan(b, ORT) is None
    a = np.full((1, k), 127, np.int8)
    got = matmul.matmul_exact(a, b, engine=ORT)
    assert calls == [] and got.tolist() == [[127 * -128 * k] * 2]
    assert int8_engine.int8_plan(b[:65793], ORT) is not None  # the largest K that is exact


@pytest.mark.parametrize(
    "case", ["b not s8", "b not integer", "b writable", "b 3-D", "b_max", "a too wide", "a_max"]
)
def test_falls_back_where_the_engine_cannot_be_exact(monkeypatch, case):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (20, 64)).astype(np.int16)
    b = rng.integers(-128, 128, (64, 8)).astype(np.int16)
    kw = {"a_max": 128}
    if case == "b not s8":
        b[3, 3] = 128
    elif case == "b not integer":
        b = b + np.float32(0.5)
    elif case == "b 3-D":
        b = np.stack([b, b])
    elif case == "b_max":
        kw["b_max"] = 128
    elif case == "a too wide":
        a[0, :2], kw = (-255, 255), {"a_max": 255}
    elif case == "a_max":
        kw = {"a_max": 256}
    if case != "b writable":
        b = frozen(b)
    got = matmul.matmul_exact(a, b, engine=ORT, **kw)
    assert calls == []
    if case == "b not integer":
        assert np.array_equal(got, np.matmul(a.astype(np.float64), b).astype(np.int64))
    else:
        assert np.array_equal(got, np.matmul(a.astype(np.int64), b.astype(np.int64)))


def test_numpy_engine_and_small_gemms_skip_the_engine(monkeypatch):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (300, 300)).astype(np.int8)
    b = frozen(rng.integers(-128, 128, (300, 30)).astype(np.int8))
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(matmul.matmul_exact(a, b, engine=GemmEngine.NUMPY), want)
    small = a[:2, :8].astype(np.int64) @ b[:8].astype(np.int64)
    assert np.array_equal(matmul.matmul_exact(a[:2, :8], b[:8]), small)  # under MIN_MACS
    wide = np.repeat(a, 2, axis=1)[:, ::2]  # neither rows nor columns contiguous
    assert np.array_equal(matmul.matmul_exact(wide, b), want)
    assert calls == []
    assert np.array_equal(matmul.matmul_exact(a, b), want)  # the default engine, here ORT
    assert np.array_equal(matmul.matmul_exact(np.asfortranarray(a), b), want)  # columns
    assert calls == [128, 128]


def test_default_engine_and_zero_points():
    assert int8_engine.default_engine() is ORT
    assert int8_engine.engine_works(GemmEngine.NUMPY)
    zp = int8_engine.zero_point
    assert zp(np.zeros(3, np.uint8), None) == 0 and zp(np.zeros(3, np.int8), None) == 128
    assert zp(np.array([-255, 0], np.int16), 255) == 255
    assert zp(np.array([-128, 128], np.int16), 128) is None
    assert zp(np.array([0, 255], np.float32), 255) == 0
    assert zp(np.array([-1, 255], np.float32), 255) is None


def test_one_group_of_weights_broadcasts_like_matmul(monkeypatch):
    """oneDNN's grouped columns with one group: ``(1, K, N)`` weights; ``a`` 3-D or 2-D."""
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(3)
    b = frozen(rng.integers(-128, 128, (1, 200, 12)).astype(np.float32))
    for shape in ((1, 30, 200), (30, 200)):
        a = rng.integers(0, 256, shape).astype(np.float32)
        got = matmul.matmul_exact(a, b, a_max=255, engine=ORT)
        want = np.matmul(a.astype(np.int64), b.astype(np.int64))
        assert got.shape == want.shape == (1, 30, 12) and np.array_equal(got, want)
    assert calls == [0, 0]


def test_int32_results_only_from_the_engine(monkeypatch):
    """``allow_int32`` narrows only what the engine computes; the float path stays int64."""
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (50, 400)).astype(np.int8)
    b = frozen(rng.integers(-128, 128, (400, 20)).astype(np.int8))
    want = a.astype(np.int64) @ b.astype(np.int64)
    got = matmul.matmul_exact(a, b, allow_int32=True)
    assert calls == [128] and got.dtype == np.int32 and np.array_equal(got, want)
    slow = matmul.matmul_exact(a, b, engine=GemmEngine.NUMPY, allow_int32=True)
    assert slow.dtype == np.int64 and np.array_equal(slow, want)
    # u8 255 (127 + 128) x -128 over K = 65793: the s32 sum reaches -(2**31 - 128), no wrap
    extremes = np.full((3, 65793), 127, np.int8)
    big = frozen(np.full((65793, 2), -128, np.int8))
    got = matmul.matmul_exact(extremes, big, engine=ORT, allow_int32=True)
    assert calls[-1] == 128 and got.dtype == np.int32
    assert (got.astype(np.int64) == 127 * -128 * 65793).all()


@pytest.mark.parametrize("kind", ["f32 s8", "s8", "u8", "i16 offset"])
def test_contiguous_columns_take_the_transposed_product(monkeypatch, kind):
    """NVDLA's im2col columns ``(N, K, P)`` read as ``(N, P, K)``: no gather into rows; the
    result is a transposed view of ``b.T @ columns``, equal to the reference."""
    transposed = []
    real = int8_engine._run_transposed
    monkeypatch.setattr(
        int8_engine, "_run_transposed", lambda *args: transposed.append(1) or real(*args)
    )
    dtype, lo, hi, a_max = A_KINDS[kind]
    rng = np.random.default_rng(6)
    cols = _values(rng, lo, hi, (2, 300, 150), "mixed").astype(dtype)
    a = cols.transpose(0, 2, 1)  # (N, P, K), columns contiguous
    b = frozen(rng.integers(-128, 128, (300, 24)).astype(np.int8))
    want = np.matmul(a.astype(np.int64), b.astype(np.int64))
    got = matmul.matmul_exact(a, b, a_max=a_max)
    assert transposed == [1] and got.dtype == np.int64 and np.array_equal(got, want)
    assert got.swapaxes(-1, -2).flags.c_contiguous  # what NVDLA wants: (N, M, P) in place
    narrow = matmul.matmul_exact(a, b, a_max=a_max, allow_int32=True)
    assert narrow.dtype == np.int32 and np.array_equal(narrow, want)


def test_sessions_follow_the_thread_setting():
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (64, 96)).astype(np.int8)
    b = frozen(rng.integers(-128, 128, (96, 16)).astype(np.int8))
    want = a.astype(np.int64) @ b.astype(np.int64)
    plan = int8_engine.int8_plan(b, ORT)
    for n in (1, 2):
        with parallel.limit_threads(n):
            assert np.array_equal(int8_engine.run(plan, a, 128), want)
    assert set(plan.sessions) == {1, 2}
