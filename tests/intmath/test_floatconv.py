"""Float-to-int conversions against the Python-float references, with ==."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import floatconv, reference
from quantemu.intmath.policies import NanPolicy

F32 = "float32_to_int_round_half_even_saturate"
F64 = "float64_to_int_round_half_away_add_truncate"
INF = float("inf")


def _f32(v: float) -> float:
    return float(np.float32(v))


def _near(v: float, dtype) -> list[float]:
    """``v`` and its float neighbours in ``dtype`` (as Python floats)."""
    t = dtype(v)
    return [float(np.nextafter(t, dtype(-INF))), float(t), float(np.nextafter(t, dtype(INF)))]


def _special(dtype) -> list[float]:
    vals = [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        127.5,
        -128.5,
        255.5,
        32767.5,
        -32768.5,
        INF,
        -INF,
        float(np.finfo(dtype).max),
        float(np.finfo(dtype).smallest_subnormal),
    ]
    for e in (0, 1, 7, 8, 15, 16, 21, 22, 23, 24, 30, 31, 32, 52, 53, 62, 63, 64):
        for v in (2.0**e, 2.0**e + 0.5, 2.0**e + 1, 2.0**e - 1, 2.0**e - 0.5):
            vals += _near(-v, dtype)
            vals += _near(v, dtype)
    vals += [0.49999999999999994, -0.49999999999999994] if dtype is np.float64 else []
    return [float(dtype(v)) for v in vals]


def float32_values() -> st.SearchStrategy[float]:
    ties = st.integers(-(2**23) + 1, 2**23 - 1).map(lambda k: k + 0.5)  # exact in float32
    return st.one_of(
        st.sampled_from(_special(np.float32)), ties, st.floats(width=32, allow_nan=False)
    )


def float64_values() -> st.SearchStrategy[float]:
    ties = st.integers(-(2**52) + 1, 2**52 - 1).map(lambda k: k + 0.5)
    return st.one_of(st.sampled_from(_special(np.float64)), ties, st.floats(allow_nan=False))


WIDTHS = st.sampled_from(
    [1, 2, 7, 8, 9, 15, 16, 17, 21, 22, 23, 24, 25, 31, 32, 33, 53, 54, 62, 63, 64]
)


# --- float32, round half to even, saturate ------------------------------------------------------


@given(xs=st.lists(float32_values(), min_size=1, max_size=12), bits=WIDTHS, signed=st.booleans())
def test_f32_matches_reference(xs, bits, signed):
    if not signed and bits == 64:
        bits = 63
    ref = getattr(reference, F32)
    fn = getattr(floatconv, F32)
    expected = [ref(v, bits, signed=signed) for v in xs]
    got = fn(np.array(xs, dtype=np.float32), bits, signed=signed)
    assert got.dtype == np.int64
    assert got.tolist() == expected
    assert fn(xs[0], bits, signed=signed) == expected[0]  # a Python float that is a float32
    assert fn(np.float32(xs[0]), bits, signed=signed) == expected[0]


@given(
    xs=st.lists(float32_values() | st.just(float("nan")), min_size=1, max_size=10),
    bits=st.integers(1, 32),
    signed=st.booleans(),
)
def test_f32_x86_indefinite(xs, bits, signed):
    kw = {"signed": signed, "nan": NanPolicy.X86_INDEFINITE}
    expected = [getattr(reference, F32)(v, bits, **kw) for v in xs]
    assert getattr(floatconv, F32)(np.array(xs, dtype=np.float32), bits, **kw).tolist() == expected


def test_f32_hand_examples():
    f = getattr(floatconv, F32)
    x = np.array([0.5, 1.5, 2.5, -2.5, 127.5, -128.5, 255.5, -1.5], dtype=np.float32)
    # onednn page: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2; s8: 127.5 -> 127, -128.5 -> -128;
    # u8: 127.5 -> 128, 255.5 -> 255, -1.5 -> 0.
    assert f(x, 8).tolist() == [0, 2, 2, -2, 127, -128, 127, -2]
    assert f(x, 8, signed=False).tolist() == [0, 2, 2, 0, 128, 0, 255, 0]
    big = np.array([2.0**31, -(2.0**31), _f32(2**31 - 1), 2.0**63, -INF], dtype=np.float32)
    assert f(big, 32).tolist() == [2**31 - 1, -(2**31), 2**31 - 1, 2**31 - 1, -(2**31)]
    assert f(big, 64).tolist() == [2**31, -(2**31), 2**31, 2**63 - 1, -(2**63)]
    # one step beyond each rail: the clamp must engage (rint gives exactly lo - 1 / hi + 1)
    edge = np.array([-129.0, -128.0, 127.0, 128.0, -129.5, 128.5], dtype=np.float32)
    assert f(edge, 8).tolist() == [-128, -128, 127, 127, -128, 127]
    assert f(edge, 8, signed=False).tolist() == [0, 0, 127, 128, 0, 128]
    nan = np.array([np.nan, 1.0], dtype=np.float32)
    assert f(nan, 8, nan=NanPolicy.X86_INDEFINITE).tolist() == [-128, 1]
    assert f(nan, 8, signed=False, nan=NanPolicy.X86_INDEFINITE).tolist() == [0, 1]
    assert f(nan, 32, nan=NanPolicy.X86_INDEFINITE).tolist() == [-(2**31), 1]


@pytest.mark.parametrize("bits", [1, 8, 21, 22, 23, 24])
@pytest.mark.parametrize("signed", [True, False])
def test_f32_binary32_rounding_path_edges(bits, signed):
    """Widths whose range lies within ``±2**22`` round by one float32 addition and saturate in
    float32 with no range scan: values around ``±2**22`` (where that addition stops being exact)
    and ``±2**23``, ties, the rails, infinities, and NaN under the x86 rule."""
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    vals = [lo - 1, lo - 0.5, lo, lo + 0.5, hi - 0.5, hi, hi + 0.5, hi + 1, INF, -INF, 0.0, -0.0]
    for e in (22, 23, 24):
        for v in (2.0**e, 2.0**e + 0.5, 2.0**e + 1, 2.0**e + 1.5, 2.0**e - 0.5, 2.0**e - 1.5):
            vals += [v, -v]
    x = np.array([_f32(v) for v in vals] + [np.nan], dtype=np.float32)
    ref = getattr(reference, F32)
    kw = {"signed": signed, "nan": NanPolicy.X86_INDEFINITE}
    assert getattr(floatconv, F32)(x, bits, **kw).tolist() == [ref(float(v), bits, **kw) for v in x]
    assert getattr(floatconv, F32)(x[:-1], bits, signed=signed).tolist() == [
        ref(float(v), bits, signed=signed) for v in x[:-1]
    ]


def test_f32_accepts_exact_float64_and_float16():
    f = getattr(floatconv, F32)
    assert f(np.array([0.5, 2.0**100, np.nan]), 8, nan=NanPolicy.X86_INDEFINITE).tolist() == [
        0,
        127,
        -128,
    ]
    assert f(np.array([2.5], dtype=np.float16), 8).tolist() == [2]
    assert f(np.zeros((2, 0), dtype=np.float32), 8).shape == (2, 0)


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (np.array([0.1, 0.2, 0.5]), {}, r"2 value\(s\) that are not float32 \(first 0.1\)"),
        (0.1, {}, "not float32"),
        (np.array([1e300]), {}, "not float32"),
        (np.array([1, 2]), {}, "dtype int64"),
        (3, {}, "the integer 3"),
        (True, {}, "the integer True"),
        (np.array([np.nan, np.nan, 1.0], dtype=np.float32), {}, r"2 NaN value\(s\) of 3"),
        (np.array([1.0], dtype=np.float32), {"bits": 0}, "outside"),
        (np.array([1.0], dtype=np.float32), {"bits": 65}, "outside"),
        (np.array([1.0], dtype=np.float32), {"bits": 64, "signed": False}, "unsigned widths"),
        (np.array([1.0], dtype=np.float32), {"signed": 1}, "signed must be True or False"),
        (np.array([1.0], dtype=np.float32), {"nan": "x86"}, "must be a NanPolicy"),
        (
            np.array([1.0], dtype=np.float32),
            {"bits": 33, "nan": NanPolicy.X86_INDEFINITE},
            "32-bit rule",
        ),
    ],
)
def test_f32_errors(x, kwargs, match):
    kwargs = {"bits": 8, **kwargs}
    with pytest.raises(InvalidInputError, match=F32 + ".*" + match):
        getattr(floatconv, F32)(x, **kwargs)


@pytest.mark.parametrize("bits", [1, 2, 8, 16, 22, 23, 24, 25, 31, 32, 33])
@pytest.mark.parametrize("signed", [True, False])
def test_single_values_at_each_rail(bits, signed):
    """One value per call, so min/max-based fast-path decisions see exactly this value."""
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    for v in (lo - 1, lo - 0.5, lo, lo + 0.5, hi - 0.5, hi, hi + 0.5, hi + 1):
        for conv, dtype, kw in ((F32, np.float32, {"signed": signed}), (F64, np.float64, {})):
            if conv == F64 and not signed:
                continue
            x = dtype(v)
            ref = getattr(reference, conv)
            fn = getattr(floatconv, conv)
            expected = ref(float(x), bits, **kw) if conv == F32 else ref(float(x), bits=bits)
            got = fn(np.array([x]), bits, **kw) if conv == F32 else fn(np.array([x]), bits=bits)
            assert got.tolist() == [expected], (conv, bits, signed, float(x))


# --- float64, NVDLA add ±0.5 then truncate ------------------------------------------------------


@given(xs=st.lists(float64_values(), min_size=1, max_size=12), bits=WIDTHS)
def test_f64_matches_reference(xs, bits):
    ref = getattr(reference, F64)
    fn = getattr(floatconv, F64)
    expected = [ref(v, bits=bits) for v in xs]
    got = fn(np.array(xs), bits=bits)
    assert got.dtype == np.int64
    assert got.tolist() == expected
    assert fn(xs[0], bits=bits) == expected[0]


@given(xs=st.lists(float32_values(), min_size=1, max_size=8))
def test_f64_widens_float32(xs):
    expected = [getattr(reference, F64)(v) for v in xs]
    assert getattr(floatconv, F64)(np.array(xs, dtype=np.float32)).tolist() == expected


def test_f64_hand_examples():
    f = getattr(floatconv, F64)
    # The +0.5 add rounds: 0.49999999999999994 + 0.5 == 1.0 in binary64, so the result is 1.
    assert f(np.array([0.49999999999999994, -0.49999999999999994])).tolist() == [1, -1]
    # Above 2**52 doubles are spaced by 1; x + 0.5 is a tie of the add and rounds to even.
    assert f(np.array([2.0**52 + 1, 2.0**52 + 2, 2.0**52])).tolist() == [
        2**52 + 2,
        2**52 + 2,
        2**52,
    ]
    assert f(np.array([-0.0, 0.0, -0.5, 0.5, 1e300, -INF])).tolist() == [
        0,
        0,
        -1,
        1,
        2**63 - 1,
        -(2**63),
    ]
    assert f(np.array([127.49, 127.5, -128.5, -129.0]), bits=8).tolist() == [127, 127, -128, -128]
    assert f(np.array([-128.4, -127.5, 126.5, 126.4]), bits=8).tolist() == [-128, -128, 127, 126]


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (np.array([1.0, np.nan]), {}, r"1 NaN value\(s\) of 2"),
        (float("nan"), {}, "NaN"),
        (np.array([1]), {}, "dtype int64"),
        (2, {}, "the integer 2"),
        (np.array([1.0]), {"bits": 0}, "outside"),
        (np.array([1.0]), {"bits": 65}, "outside"),
    ],
)
def test_f64_errors(x, kwargs, match):
    with pytest.raises(InvalidInputError, match=F64 + ".*" + match):
        getattr(floatconv, F64)(x, **kwargs)
