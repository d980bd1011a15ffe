"""converter / truncate / shifter: hand-derived goldens, the ±1 rule, properties, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nvdla import converter, shifter, shr, shr_flag, truncate
from quantemu.errors import InvalidInputError


def test_shr_rounds_half_away_from_zero_then_saturates():
    # 5/2 = 2.5 -> 3, -5/2 -> -3, 3/2 = 1.5 -> 2, -3/2 -> -2, 7/4 = 1.75 -> 2, 250/2 -> 125
    v = np.array([5, -5, 3, -3, 7, 250, 256, -258])
    assert shr(v[:5], 1, 8).tolist() == [3, -3, 2, -2, 4]  # 7/2 = 3.5 -> 4
    assert shr(v[5:], 1, 8).tolist() == [125, 127, -128]  # 128 -> 127, -129 -> -128


def test_shr_flag_pm1_rule_at_8_bits():
    # floor 128 / -129 are clamped but not counted; 129 / -130 are counted.
    y, flag = shr_flag(np.array([127, 128, 129, -128, -129, -130]), 0, 8)
    assert y.tolist() == [127, 127, 127, -128, -128, -128]
    assert flag.tolist() == [False, False, True, False, False, True]


def test_shr_flag_uses_the_floor_not_the_rounded_value():
    # v = 259, s = 1: rounded 129.5 -> 130 (clamped to 127), floor 129 -> counted.
    # v = 257, s = 1: rounded 128.5 -> 129, floor 128 = 127 + 1 -> not counted.
    y, flag = shr_flag(np.array([259, 257, -259, -261]), 1, 8)
    assert y.tolist() == [127, 127, -128, -128]
    # -259/2: floor -130 -> counted; -261/2: floor -131 -> counted
    assert flag.tolist() == [True, False, True, True]


def test_converter_golden():
    # ((x - offset) * scale) / 2^shift: (10 - -6) * -3 = -48, / 8 = -6; (0 + 6) * -3 = -18 ->
    # -2.25 -> -2; (-7 + 6) * -3 = 3 -> 0.375 -> 0; (100 + 6) * -3 = -318 -> -39.75 -> -40.
    y, flag = converter(np.array([10, 0, -7, 100]), offset=-6, scale=-3, shift=3, bits=8)
    assert y.tolist() == [-6, -2, 0, -40]
    assert not flag.any()


def test_converter_counts_with_the_pm1_rule():
    # 17-bit output: (65536 - 0) * 1 is floor 65536 = max + 1 (not counted), 65537 counted.
    _, flag = converter(np.array([65535, 65536, 65537, -65537, -65538]), offset=0, scale=1,
                        shift=0, bits=17)  # fmt: skip
    assert flag.tolist() == [False, False, True, False, True]


def test_converter_is_exact_beyond_int64():
    # (2^62 - -2^31) * 32767 exceeds int64: computed on Python ints, then rounded and saturated.
    y, flag = converter(np.array([1 << 62]), offset=-(1 << 31), scale=32767, shift=63, bits=32)
    expected = ((1 << 62) + (1 << 31)) * 32767
    assert int(y[0]) == min((expected + (1 << 62)) >> 63, (1 << 31) - 1)
    assert not flag[0]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-(1 << 40), 1 << 40), min_size=1, max_size=20),
    st.sampled_from([8, 16, 32]),
)
def test_converter_with_scale_1_shift_0_offset_0_is_saturation_only(xs, bits):
    x = np.array(xs, dtype=np.int64)
    y, flag = converter(x, offset=0, scale=1, shift=0, bits=bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    assert y.tolist() == np.clip(x, lo, hi).tolist()
    assert flag.tolist() == ((x < lo - 1) | (x > hi + 1)).tolist()  # the ±1 rule


def test_truncate_is_lsb_to_msb_with_rounding():
    # x[msb:lsb] with lsb = 4, bits = 8: 24/16 = 1.5 -> 2, -24/16 -> -2, 4000/16 = 250 -> 127.
    y, flag = truncate(np.array([24, -24, 4000, 8]), lsb=4, bits=8)
    assert y.tolist() == [2, -2, 127, 1]  # 8/16 = 0.5 -> 1 (away from zero)
    assert flag.tolist() == [False, False, True, False]


def test_shifter_saturates_and_flags_changes():
    # 3 << 30 = 3221225472 > INT32_MAX; -1 << 31 = INT32_MIN exactly (not a saturation);
    # -1 << 32 saturates; 0 never does.
    y, flag = shifter(np.array([1, 3, -1, -2, 0]), shift=31, bits=32)
    assert y.tolist() == [2147483647, 2147483647, -2147483648, -2147483648, 0]
    assert flag.tolist() == [True, True, False, True, False]
    y, flag = shifter(np.array([-1, 0, 5]), shift=63, bits=32)
    assert y.tolist() == [-2147483648, 0, 2147483647]
    assert flag.tolist() == [True, False, True]


@pytest.mark.parametrize("func", [converter, truncate, shifter])
def test_float_input_is_rejected(func):
    kwargs = {
        "converter": {"offset": 0, "scale": 1, "shift": 0, "bits": 8},
        "truncate": {"lsb": 0, "bits": 8},
        "shifter": {"shift": 0, "bits": 8},
    }[func.__name__]
    with pytest.raises(InvalidInputError, match="must be an integer array, got dtype float64"):
        func(np.array([1.5]), **kwargs)


def test_negative_shift_is_rejected():
    with pytest.raises(InvalidInputError, match="shift = -1 is negative"):
        converter(np.array([1]), offset=0, scale=1, shift=-1, bits=8)
    with pytest.raises(InvalidInputError, match="lsb = -2 is negative"):
        truncate(np.array([1]), lsb=-2, bits=8)
    with pytest.raises(InvalidInputError, match="shift must be an int"):
        shifter(np.array([1]), shift=1.0, bits=8)
