"""PDP and CACC: hand-derived goldens (arithmetic in comments), properties and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nvdla import (
    CaccRegisters,
    PdpRegisters,
    cacc,
    pdp,
    pdp_avg,
    pdp_max,
    pdp_min,
)
from quantemu.errors import InvalidInputError


def geometry(shape, kernel, stride=(1, 1), pads=(0, 0, 0, 0), **fields):
    """PdpRegisters for a [c, h, w] cube, kernel (kh, kw), stride (sh, sw), pads (t, l, b, r)."""
    (c, h, w), (kh, kw), (sh, sw) = shape, kernel, stride
    pt, pl, pb, pr = pads
    return PdpRegisters(
        CUBE_IN_CHANNEL=c - 1, CUBE_OUT_CHANNEL=c - 1, CUBE_IN_HEIGHT=h - 1, CUBE_IN_WIDTH=w - 1,
        CUBE_OUT_HEIGHT=(h + pt + pb - kh) // sh, CUBE_OUT_WIDTH=(w + pl + pr - kw) // sw,
        KERNEL_HEIGHT=kh - 1, KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_HEIGHT=sh - 1,
        KERNEL_STRIDE_WIDTH=sw - 1, PAD_TOP=pt, PAD_LEFT=pl, PAD_BOTTOM=pb, PAD_RIGHT=pr,
        **fields,
    )  # fmt: skip


def test_avg_3x3_with_firmware_reciprocals_is_two_roundings_not_round_s_over_9():
    # s = 32774: rhaz(32774 * 21845 / 2^16) = rhaz(10924.49997) = 10924;
    # rhaz(10924 * 21845 / 2^16) = rhaz(3641.33) = 3641, while round(32774 / 9) = 3642.
    x = np.array([3642] * 5 + [3641] * 4, dtype=np.int16).reshape(1, 3, 3)
    recips = {"RECIP_KERNEL_WIDTH": 21845, "RECIP_KERNEL_HEIGHT": 21845}
    regs = geometry((1, 3, 3), (3, 3), INPUT_DATA=1, **recips)
    assert pdp_avg(x, regs).tolist() == [[[3641]]]


def test_avg_adds_pad_values_per_real_row_and_per_window():
    # 2x2 kernel, PAD_LEFT = 1, PAD_TOP = 1 over a 1x1 cube holding 10: the window has 1 real
    # row and 1 padded column (nc = 1), 1 padded row (nr = 1):
    # s = 10 + 1 * PAD_VALUE_1X + kw * PAD_VALUE_1X = 10 + 3 + 2 * 3 = 19; / 4 -> 4.75 -> 5
    # (reciprocals 1/2: rhaz(19/2) = 10, rhaz(10/2) = 5).
    x = np.array([[[10]]], dtype=np.int8)
    regs = geometry((1, 1, 1), (2, 2), pads=(1, 1, 0, 0), PAD_VALUE_1X=3,
                    RECIP_KERNEL_WIDTH=32768, RECIP_KERNEL_HEIGHT=32768)  # fmt: skip
    assert pdp_avg(x, regs).tolist() == [[[5]]]


def test_int8_average_accumulator_wraps_at_16_bits():
    # 2x2 kernel, PAD_LEFT 1 on a [1, 2, 1] cube of 100s: s = 200 + 2 rows * PAD_VALUE_1X;
    # PAD_VALUE_1X = 0x7F7F (sign bit 7 clear: 32639 kept) -> s = 65478 -> wraps to -58;
    # / 2 = -29, / 2 = -14.5 -> -15.
    x = np.array([[[100], [100]]], dtype=np.int8)
    regs = geometry((1, 2, 1), (2, 2), pads=(0, 1, 0, 0), PAD_VALUE_1X=0x7F7F,
                    RECIP_KERNEL_WIDTH=32768, RECIP_KERNEL_HEIGHT=32768)  # fmt: skip
    assert pdp_avg(x, regs).tolist() == [[[-15]]]


def test_average_output_wraps_instead_of_saturating():
    # 1x1 kernel, RECIP_KERNEL_WIDTH = 0x1FFFF (~2.0): 100 * 131071 / 65536 = 199.998 -> 200,
    # * 1.0 -> 200 -> wraps to int8 -56.
    x = np.array([[[100]]], dtype=np.int8)
    regs = geometry((1, 1, 1), (1, 1), RECIP_KERNEL_WIDTH=0x1FFFF, RECIP_KERNEL_HEIGHT=1 << 16)
    assert pdp_avg(x, regs).tolist() == [[[-56]]]


def test_max_and_min_ignore_padding():
    # All values negative: with pads a zero pad would win the max; it must not.
    x = np.array([[[-5, -7], [-9, -3]]], dtype=np.int16)
    regs = geometry((1, 2, 2), (2, 2), pads=(1, 1, 1, 1), INPUT_DATA=1, POOLING_METHOD=1)
    assert pdp_max(x, regs).tolist() == [[[-5, -5, -7], [-5, -3, -3], [-9, -3, -3]]]
    regs = geometry((1, 2, 2), (2, 2), pads=(1, 1, 1, 1), INPUT_DATA=1, POOLING_METHOD=2)
    assert pdp_min(x, regs).tolist() == [[[-5, -7, -7], [-9, -9, -7], [-9, -9, -3]]]


def test_strides_larger_than_the_kernel_skip_inputs():
    # 1x1 kernel, stride 3 over width 7: picks columns 0, 3, 6.
    x = np.arange(7, dtype=np.int8).reshape(1, 1, 7)
    regs = geometry((1, 1, 7), (1, 1), stride=(1, 3), POOLING_METHOD=1)
    assert pdp(x, regs).tolist() == [[[0, 3, 6]]]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=6, max_size=6), st.booleans())
def test_a_1x1_average_with_unit_reciprocals_is_the_identity(vals, int16):
    dtype = np.int16 if int16 else np.int8
    x = np.array(vals, dtype=dtype).reshape(1, 2, 3)
    assert pdp_avg(x, geometry((1, 2, 3), (1, 1), INPUT_DATA=int(int16))).tolist() == x.tolist()


def test_pdp_input_validation():
    regs = geometry((1, 2, 2), (1, 1))
    with pytest.raises(InvalidInputError, match=r"shape \(C, H, W\) = \(1, 2, 2\)"):
        pdp(np.zeros((1, 2, 3), np.int8), regs)
    with pytest.raises(InvalidInputError, match=r"INPUT_DATA = INT8 but X holds values"):
        pdp(np.full((1, 2, 2), 300, np.int16), regs)
    with pytest.raises(InvalidInputError, match=r"pdp_max: POOLING_METHOD = 0 \(AVERAGE\)"):
        pdp_max(np.zeros((1, 2, 2), np.int8), regs)


# --- CACC ---------------------------------------------------------------------------------------

BIG = (1 << 37) - 1  # the largest INT16 partial sum (38-bit signed)


def test_clip_truncate_rounds_ties_away_and_int32_saturation_is_counted():
    # 6 / 4 = 1.5 -> 2, -6 / 4 -> -2, 10 / 4 = 2.5 -> 3; 2^33 + 1 >> 2 -> 2^31 saturated.
    p = np.array([[6, -6, 10, 1 << 33], [0, 0, 0, 1]], dtype=np.int64)
    r = cacc(p, CaccRegisters(PROC_PRECISION=1, CLIP_TRUNCATE=2))
    assert r.y.tolist() == [2, -2, 3, 2147483647]
    assert r.y.dtype == np.int32
    assert r.SAT_COUNT == 1


def test_48_bit_clamp_at_every_step_changes_the_result():
    # 1025 steps of 2^37 - 1 exceed 2^47 - 1 (= 1024 * 2^37 - 1): clamped there. One step of
    # -2^37 then gives 2^47 - 1 - 2^37; >> 16 -> 2^31 - 2^21 (no int32 saturation).
    # Without the per-step clamp: 2^47 - 1025 >> 16 -> 2^31 -> saturated (counted).
    p = np.array([BIG] * 1025 + [-(1 << 37)], dtype=np.int64)[:, None]
    r = cacc(p, CaccRegisters(PROC_PRECISION=1, CLIP_TRUNCATE=16))
    assert r.y.tolist() == [(1 << 31) - (1 << 21)]
    assert r.SAT_COUNT == 0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-(1 << 21), (1 << 21) - 1), min_size=1, max_size=8))
def test_one_step_with_clip_0_is_the_identity(vals):
    r = cacc(np.array([vals], dtype=np.int64), CaccRegisters())
    assert r.y.tolist() == vals
    assert r.SAT_COUNT == 0


def test_cacc_input_validation():
    with pytest.raises(InvalidInputError, match=r"INT8 partial sums are 22-bit signed"):
        cacc(np.array([[1 << 21]]), CaccRegisters())
    with pytest.raises(InvalidInputError, match=r"P must be an integer array \[K, ...\]"):
        cacc(np.zeros((2, 2)), CaccRegisters())
    with pytest.raises(InvalidInputError, match="K >= 1 steps"):
        cacc(np.zeros((0, 2), np.int64), CaccRegisters())
