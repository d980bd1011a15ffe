"""NNIE log_quantize / log_dequantize: hand-derived goldens, properties, reference, errors."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.nnie import log_dequantize, log_quantize
from quantemu.backends.nnie.reference import dequantize_scalar, quantize_scalar
from quantemu.errors import InvalidInputError, UnsupportedError

F32 = np.float32


def straddle(num32: int) -> tuple[float, float]:
    """The float32 values just below and just above 2^(num32/32) (irrational: num32 odd or not a
    multiple of 32), found with 60-digit decimals, independently of the backend."""
    with localcontext() as ctx:
        ctx.prec = 60
        b = Decimal(2) ** (Decimal(num32) / 32)
        f = F32(float(b))
        if Decimal(float(f)) > b:
            lo, hi = np.nextafter(f, F32(0)), f
        else:
            lo, hi = f, np.nextafter(f, F32(np.inf))
        assert Decimal(float(lo)) < b < Decimal(float(hi))
    return float(lo), float(hi)


def level(n16: int) -> float:
    """f32(2^(n16/16)), as nnie.md §4 says to compute it (float64 exp2, then float32)."""
    return float(F32(2.0 ** (n16 / 16)))


def quantize(values, clip):
    codes, y = log_quantize(np.array(values, F32), clip)
    return codes.tolist(), y.tolist()


# -- hand-derived codes at the rows of the seed's table -------------------------------------------

C15 = 2.0 ** (15 / 16)  # k = 15, z = -112: P = 2^((z-16)/16) = 2^-8 exactly, N = 2^(-127/16)
Z15 = -112


def boundary_rows_k15():
    """(x, code, y) at every boundary of the seed's table for c = 2^(15/16), derived by hand:
    boundary j/j+1 is 2^((z+j+1/2)/16) = 2^((2z+2j+1)/32); level i is 2^((z+i)/16)."""
    n_lo, n_hi = straddle(2 * Z15 - 30)  # N = 2^((z-15)/16)
    b01 = straddle(2 * Z15 + 1)  # 0/1 boundary
    b12 = straddle(2 * Z15 + 3)  # 1/2 boundary
    b126 = straddle(2 * Z15 + 253)  # 126/127 boundary
    p = 2.0**-8
    l0, l1, l2 = level(Z15), level(Z15 + 1), level(Z15 + 2)
    l126, l127 = level(Z15 + 126), level(Z15 + 127)
    p_below = float(np.nextafter(F32(p), F32(0)))
    return [
        (p, 0x00, l0),  # x = P exactly: the document's rule, code 0x00, y = 2P = 2^-7
        (p_below, 0x80, 0.0),  # just below P: zero
        (float(np.nextafter(F32(p), F32(1))), 0x00, l0),
        (-p, 0x80, 0.0),  # |x| = 2^-8 < N: zero
        (-n_lo, 0x80, 0.0),  # -N < x: zero
        (-n_hi, 0x81, -l1),  # x < -N: clamped up to index 1
        (b01[0], 0x00, l0),
        (b01[1], 0x01, l1),
        (-b01[0], 0x81, -l1),  # negative side has no index 0
        (-b01[1], 0x81, -l1),
        (b12[0], 0x01, l1),
        (b12[1], 0x02, l2),
        (-b12[0], 0x81, -l1),
        (-b12[1], 0x82, -l2),
        (b126[0], 0x7E, l126),
        (b126[1], 0x7F, l127),
        (-b126[0], 0xFE, -l126),
        (-b126[1], 0xFF, -l127),
        (l0, 0x00, l0),  # the smallest and largest levels themselves
        (l127, 0x7F, l127),
        (-l127, 0xFF, -l127),
        (2.0**-7 * 2 ** (1 / 16), 0x01, l1),
    ]


@pytest.mark.parametrize("x, code, y", boundary_rows_k15())
def test_table_rows_k15(x, code, y):
    codes, ys = quantize([x], C15)
    assert codes == [code]
    assert ys == [y]


def test_table_rows_c37_negative_threshold_exact():
    # c = 3.7: 16*log2(3.7) = 30.2 -> k = 30, z = -97. N = 2^((z-15)/16) = 2^-7 exactly.
    n = 2.0**-7
    above_n = float(np.nextafter(F32(n), F32(1)))
    p_lo, p_hi = straddle(2 * -97 - 32)  # P = 2^(-113/16), irrational
    codes, ys = quantize([-n, -above_n, p_lo, p_hi, 3.7, -3.7, 2.0**-6], 3.7)
    assert codes == [0x80, 0x81, 0x80, 0x00, 0x7F, 0xFF, 0x01]
    # level 1 is 2^((-97+1)/16) = 2^-6; the largest level is 2^(30/16) = 3.668..., not 3.7
    assert ys == [0.0, -(2.0**-6), 0.0, level(-97), level(30), -level(30), 2.0**-6]


def test_table_rows_c1():
    # c = 1: k = 0, z = -127, level i = 2^((i-127)/16): 1.0 is i=127, 0.5 is i=111, 2^-7 is i=15.
    codes, ys = quantize([1.0, 0.5, 2.0**-7, -0.5, 100.0], 1.0)
    assert codes == [0x7F, 0x6F, 0x0F, 0xEF, 0x7F]
    assert ys == [1.0, 0.5, 2.0**-7, -0.5, 1.0]


def test_special_inputs():
    tiny, fmin, fmax = 2.0**-149, 2.0**-126, float(np.finfo(F32).max)
    values = [0.0, -0.0, math.inf, -math.inf, fmax, -fmax, fmin, -fmin, tiny, -tiny]
    codes, ys = quantize(values, 3.7)
    assert codes == [0x80, 0x80, 0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x80, 0x80, 0x80]
    y_bits = np.array(ys, F32).view(np.uint32)
    assert y_bits[0] == y_bits[1] == 0  # +-0 both give +0.0


def test_subnormal_positive_threshold():
    # c = 2^(-2241/16): z = -2368, P = 2^((z-16)/16) = 2^-149, the smallest subnormal.
    clip = 2.0 ** (-2241 / 16)
    codes, ys = quantize([2.0**-149, -(2.0**-149), 3 * 2.0**-149, 0.0], clip)
    assert codes[0] == 0x00 and codes[3] == 0x80
    assert ys[0] == level(-2368)


def test_top_level_overflows_to_inf():
    # c = 3.4e38: 16*log2(c) = 2047.97 -> k = 2048, z = 1921; level 127 = 2^128 -> inf.
    # FLT_MAX: 16*log2 = 2048 - 2.8e-6 -> rounds to 2048, index 127. 2^127: 2032 - 1921 = 111.
    fmax = float(np.finfo(F32).max)
    codes, ys = quantize([fmax, 2.0**127, -(2.0**127), -math.inf], 3.4e38)
    assert codes == [0x7F, 0x6F, 0xEF, 0xFF]
    assert ys == [math.inf, 2.0**127, -(2.0**127), -math.inf]


def test_every_level_underflows():
    # c = 1e-300: k = -15945, z = -16072. Every nonzero float32 is above 2^((z+126.5)/16), so it
    # saturates to 0x7F/0xFF, whose level 2^(-15945/16) underflows to +0.0 / -0.0.
    codes, ys = quantize([2.0**-149, -1.0, math.inf, 0.0], 1e-300)
    assert codes == [0x7F, 0xFF, 0x7F, 0x80]
    assert np.array(ys, F32).view(np.uint32).tolist() == [0, 0x80000000, 0, 0]


def test_huge_clip_zeroes_every_finite_value():
    codes, _ = quantize([3.4e38, -3.4e38, 1.0, math.inf], 1e300)
    assert codes == [0x80, 0x80, 0x80, 0x7F]


# -- the threshold rule ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [15, 127, 47, 111, -1, -2241, 2031])
def test_exact_positive_threshold_maps_to_code_0(k):
    # k = 15 (mod 16) makes z = k - 127 a multiple of 16, so P = 2^((z-16)/16) is a power of two.
    clip = 2.0 ** (k / 16)
    p = 2.0 ** ((k - 143) // 16)
    codes, ys = quantize([p, float(np.nextafter(F32(p), F32(0)))], clip)
    assert codes == [0x00, 0x80]
    assert ys[0] == level(k - 127)  # y = L(0) = 2P (nnie.md departs from MQBench, which gives P)


@pytest.mark.parametrize("k", [14, 30, -2, 126, -2226])
def test_exact_negative_threshold_maps_to_zero(k):
    # k = 14 (mod 16): N = 2^((z-15)/16) is a power of two; x = -N is zero, x just below is 0x81.
    clip = 2.0 ** (k / 16)
    n = 2.0 ** ((k - 142) // 16)
    codes, ys = quantize([-n, -float(np.nextafter(F32(n), F32(np.inf)))], clip)
    assert codes == [0x80, 0x81]
    assert np.array(ys[0], F32).view(np.uint32) == 0  # +0.0


# -- round trip ------------------------------------------------------------------------------------

ROUND_TRIP_CLIPS = [2.0 ** (k / 16) for k in range(-1889, 2048, 13)] + [
    3.7,
    6.0,
    255.0,
    0.1,
    1e-3,
    1e5,
    1e-30,
    1e30,
    2.0 ** (2047 / 16),
    2.0 ** (-1889 / 16),
]


def test_round_trip_every_code():
    # Where all levels are distinct normal float32 values (the default clip-table range),
    # quantizing each code's level gives back the code; 0x80 dequantizes to +0 and back.
    codes = np.arange(256, dtype=np.uint8)
    for clip in ROUND_TRIP_CLIPS:
        y = log_dequantize(codes, clip)
        back, y2 = log_quantize(y, clip)
        np.testing.assert_array_equal(back, codes, err_msg=f"clip={clip!r}")
        np.testing.assert_array_equal(y2.view(np.uint32), y.view(np.uint32))


def test_dequantize_all_codes_c1():
    y = log_dequantize(np.arange(256, dtype=np.uint8), 1.0)
    assert y[0x7F] == 1.0 and y[0x6F] == 0.5 and y[0xFF] == -1.0
    assert y[0x80] == 0.0 and y.view(np.uint32)[0x80] == 0
    assert y[0x00] == level(-127) and y[0x81] == -level(-126)
    assert len(set(y.tolist())) == 256


def test_shape_is_kept():
    x = np.linspace(-4, 4, 24, dtype=F32).reshape(2, 3, 4)
    codes, y = log_quantize(x, 3.7)
    assert codes.shape == y.shape == (2, 3, 4)
    assert log_dequantize(codes, 3.7).shape == (2, 3, 4)
    codes0, y0 = log_quantize(F32(0.25), 3.7)
    assert codes0.shape == () and y0.shape == ()
    empty, _ = log_quantize(np.zeros((0, 3), F32), 3.7)
    assert empty.shape == (0, 3)


def test_strided_and_fortran_inputs():
    x = np.linspace(-4, 4, 60, dtype=F32).reshape(6, 10)
    for view in (x[:, ::3], np.asfortranarray(x), x.T):
        codes, y = log_quantize(view, 3.7)
        want_codes, want_y = log_quantize(np.ascontiguousarray(view), 3.7)
        np.testing.assert_array_equal(codes, want_codes)
        np.testing.assert_array_equal(y, want_y)


def test_snapping_does_not_change_codes():
    x = np.random.default_rng(3).standard_normal(1000).astype(F32) * 3
    assert np.array_equal(log_quantize(x, 3.7)[0], log_quantize(x, 2.0 ** (30 / 16))[0])


# -- against the naive scalar reference ------------------------------------------------------------


@st.composite
def clips(draw):
    kind = draw(st.sampled_from(["table", "any", "special"]))
    if kind == "table":
        return 2.0 ** (draw(st.integers(-2450, 2100)) / 16)
    if kind == "special":
        return draw(st.sampled_from([3.7, 1.0, 1e-300, 1e300, 3.4e38, 1e-30, 2.0 ** (15 / 16)]))
    return draw(st.floats(min_value=1e-300, max_value=1e300))


def _near(value: float, steps: int) -> list[float]:
    """float32 values around ``value`` (the cast and its neighbours)."""
    if not 0 < value < 3.4e38:
        return []
    f = F32(value)
    out = [f]
    for _ in range(steps):
        out += [np.nextafter(out[-1], F32(0)), np.nextafter(out[0], F32(np.inf))]
    return [float(v) for v in out]


@st.composite
def inputs_for(draw, clip):
    z = round(16 * math.log2(clip)) - 127
    points = []
    for _ in range(draw(st.integers(1, 6))):
        # rounding boundaries j/j+1, and the thresholds P (2z-32) and N (2z-30), as 2^(h/32)
        h = draw(st.sampled_from([2 * z - 32, 2 * z - 30, 2 * z + 1, 2 * z + 3, 2 * z + 253]))
        h = draw(st.one_of(st.just(h), st.integers(2 * z - 40, 2 * z + 260)))
        if -5000 < h < 4200:
            points += _near(2.0 ** (h / 32), 2)
    anything = st.floats(width=32, allow_nan=False)
    values = draw(st.lists(st.one_of(anything, st.sampled_from(points or [0.0])), max_size=48))
    signs = draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    return [-v if s else v for v, s in zip(values, signs, strict=True)]


@given(st.data())
def test_matches_scalar_reference(data):
    clip = data.draw(clips())
    values = data.draw(inputs_for(clip))
    x = np.array(values, F32)
    codes, y = log_quantize(x, clip)
    want = [quantize_scalar(float(v), clip) for v in x]
    assert codes.tolist() == want
    want_y = np.array([dequantize_scalar(c, clip) for c in want], F32)
    assert y.view(np.uint32).tolist() == want_y.view(np.uint32).tolist()


@given(clips(), st.lists(st.integers(0, 255), max_size=64))
def test_dequantize_matches_scalar_reference(clip, codes):
    y = log_dequantize(np.array(codes, np.uint8), clip)
    want = np.array([dequantize_scalar(c, clip) for c in codes], F32)
    assert y.view(np.uint32).tolist() == want.view(np.uint32).tolist()


# -- errors ----------------------------------------------------------------------------------------


def test_nan_is_an_error_naming_the_count():
    x = np.array([[1.0, np.nan], [np.nan, -np.nan]], F32)
    with pytest.raises(InvalidInputError, match=r"3 NaN value\(s\) of 4 \(first at index \(0, 1\)"):
        log_quantize(x, 3.7)


@pytest.mark.parametrize("clip", [0.0, -1.0, math.inf, -math.inf, math.nan, -0.0])
def test_bad_clip_values(clip):
    with pytest.raises(InvalidInputError, match="clip must be finite and > 0"):
        log_quantize(np.ones(2, F32), clip)
    with pytest.raises(InvalidInputError, match="clip must be finite and > 0"):
        log_dequantize(np.ones(2, np.uint8), clip)


@pytest.mark.parametrize("clip", [True, "3.7", None, [3.7]])
def test_bad_clip_types(clip):
    with pytest.raises(InvalidInputError, match="clip must be a real number"):
        log_quantize(np.ones(2, F32), clip)


def test_16_bit_is_unsupported():
    with pytest.raises(UnsupportedError, match="16-bit NNIE has no public specification"):
        log_quantize(np.ones(2, F32), 3.7, bits=16)
    with pytest.raises(UnsupportedError, match="16-bit NNIE has no public specification"):
        log_dequantize(np.ones(2, np.uint8), 3.7, bits=16)


def test_other_bit_widths_are_unsupported():
    with pytest.raises(UnsupportedError, match="bits=4 requested: NNIE has only 8-bit and 16-bit"):
        log_quantize(np.ones(2, F32), 3.7, bits=4)


@pytest.mark.parametrize("bits", ["8", 8.0, True, None])
def test_bits_must_be_an_integer(bits):
    with pytest.raises(InvalidInputError, match="bits must be the integer 8"):
        log_quantize(np.ones(2, F32), 3.7, bits=bits)


def test_float64_input_is_rejected_with_remedy():
    with pytest.raises(InvalidInputError, match=r"dtype float64 .*x\.astype\(np\.float32\)"):
        log_quantize(np.ones(3), 3.7)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.dtype(">f4")])
def test_other_input_dtypes_are_rejected(dtype):
    with pytest.raises(InvalidInputError, match="NNIE log_quantize takes native float32"):
        log_quantize(np.ones(3, dtype), 3.7)


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.float32])
def test_codes_must_be_uint8(dtype):
    with pytest.raises(InvalidInputError, match="NNIE codes are uint8"):
        log_dequantize(np.ones(3, dtype), 3.7)
