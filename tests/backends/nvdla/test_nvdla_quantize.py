"""Converter programming (quantize.py), the CDMA converter, and LUT programming."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nvdla import CdmaCvtRegisters, converter, pdp_avg, sdp
from quantemu.backends.nvdla.cdma import cdma_convert
from quantemu.backends.nvdla.lut_program import (
    LutUnit,
    lrn_lut,
    lut_error,
    program_lut,
    sigmoid_lut,
    tanh_lut,
)
from quantemu.backends.nvdla.quantize import (
    ScaleSplit,
    bias_alignment_shift,
    cdp_converter_fields,
    ew_converter_fields,
    output_converter_fields,
    padding_value,
    program_bn_mean,
    program_pdp,
    quantize_bias_int16,
    quantize_weights,
    split_scale,
    split_scales,
)
from quantemu.backends.nvdla.registers import PoolingMethod, Precision, SdpRegisters
from quantemu.errors import InvalidInputError


def round_away(q: Fraction) -> int:
    return math.floor(abs(q) + Fraction(1, 2)) * (1 if q >= 0 else -1)


# --- split_scale ---------------------------------------------------------------------------------


def test_split_scale_truncates_and_keeps_scale_in_int16_top_octave():
    # 0.75: numBits 0 -> shift 15, 0.75 * 2^15 = 24576. float32(-3.1) = -3.0999999046:
    # numBits 2 -> shift 13, trunc(25395.199) = 25395. 0.999999 * 2^15 = 32767.97 -> 32767
    # (truncation; rounding would overflow int16).
    assert split_scale(0.75) == (24576, 15)
    assert split_scale(-3.1) == (-25395, 13)
    assert split_scale(0.999999) == (32767, 15)


def test_split_scale_power_of_two_float_log_quirk():
    # float32 ln(0.5) / ln 2 = -1.0000000027: numBits lands one low, scale = 2^15 > int16 max:
    # NVIDIA's compiler rejects the factor; the exact variant gives 16384 * 2^-15.
    with pytest.raises(InvalidInputError, match="scale 32768 > 32767"):
        split_scale(0.5)
    assert split_scale(0.5, how=ScaleSplit.EXACT) == (16384, 15)
    assert split_scale(4.0) == (16384, 12)  # this power of two lands correctly


def test_split_scale_errors():
    with pytest.raises(InvalidInputError, match="needs 16 integer bits"):
        split_scale(40000.0)
    with pytest.raises(InvalidInputError, match="right shift of 81"):
        split_scale(1e-20)
    with pytest.raises(InvalidInputError, match="not finite"):
        split_scale(float("nan"))
    with pytest.raises(InvalidInputError, match="scale 104857 > 32767"):
        split_scale(0.1, shift=20)
    assert split_scale(0.1, shift=10) == (102, 10)  # trunc(102.4)
    assert split_scale(0.0) == (0, 1)


def test_split_scales_share_the_largest_factors_shift():
    scales, shift = split_scales([0.3, -0.1, 0.01])
    assert shift == 16  # 0.3: numBits -1
    assert scales.tolist() == [19660, -6553, 655]  # trunc(v * 65536), float32 v


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.floats(-3e4, 3e4, allow_nan=False) | st.sampled_from([0.0, 2.0**14, -(2.0**-30)]),
        min_size=1,
        max_size=12,
    ),
    how=st.sampled_from(list(ScaleSplit)),
)
def test_split_scales_equals_split_scale_with_the_common_shift(values, how):
    """The vectorised split is the compiler's per-factor rule with the largest factor's shift."""
    a32 = [abs(float(np.float32(v))) for v in values]
    big = values[a32.index(max(a32))]
    try:
        _, shift = split_scale(big, how=how)
        # shift 0 reads as "not forced" (the compiler's quirk), so a factor may then fail alone
        expected = [split_scale(v, shift=shift, how=how)[0] for v in values]
    except InvalidInputError:
        with pytest.raises(InvalidInputError):
            split_scales(values, how=how)
        return
    scales, got_shift = split_scales(np.array(values), how=how)
    assert got_shift == shift
    assert scales.tolist() == expected


@settings(max_examples=200, deadline=None)
@given(
    sf=st.floats(2.0**-20, 2.0**14, exclude_max=True),
    x=st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=8),
)
def test_programmed_converter_reproduces_round_x_times_sf_within_the_documented_bound(sf, x):
    """Round trip: ``y = converter(x)`` vs ``round(x * SF)``, both saturated to int32.

    Bound (README): with ``(scale, shift) = split_scale(SF)``,
    ``|y - round(x SF)| <= 1 + |x SF| / |scale| + |x SF| 2^-23``, and ``|scale| >= 2^13``, so
    ``<= 1 + |x SF| 2^-12``: 1 LSB for int8-sized results, at most 9 for int16-sized ones.
    """
    try:
        scale, shift = split_scale(sf)
    except InvalidInputError:  # an exact power of two hit by the float-log quirk
        scale, shift = split_scale(sf, how=ScaleSplit.EXACT)
    assert abs(scale) >= 1 << 13
    y, _ = converter(np.array(x, dtype=np.int64), offset=0, scale=scale, shift=shift, bits=32)
    for xi, yi in zip(x, y.tolist(), strict=True):
        exact = Fraction(xi) * Fraction(sf)
        ref = max(-(1 << 31), min((1 << 31) - 1, round_away(exact)))
        bound = 1 + abs(exact) / abs(scale) + abs(exact) / 2**23
        assert abs(yi - ref) <= bound
        assert abs(yi - ref) <= 1 + abs(exact) / 2**12


def test_output_converter_fields_drive_the_sdp():
    # s_in * s_w / s_out = 0.02 * 0.01 / 0.05 = 0.004: numBits -7 -> shift 22,
    # scale = trunc(0.004f * 2^22) = 16777; y = rhaz(x * 16777 / 2^22).
    fields = output_converter_fields(0.02, 0.01, 0.05)
    assert fields == {"CVT_OFFSET": 0, "CVT_SCALE": 16777, "CVT_SHIFT": 22}
    r = sdp(np.array([10000, -10000, 31250]), SdpRegisters(**fields))
    assert r.y.tolist() == [40, -40, 125]  # 39.999 -> 40; 31250 * 0.004 = 124.998 -> 125


# --- weights, biases, BN, EW, CDP, padding --------------------------------------------------------


def test_quantize_weights_round_half_up_in_float32():
    q, scale = quantize_weights([1.27, -1.27, 0.005, -0.005, 0.0])
    assert scale == pytest.approx(0.01)
    assert q.tolist() == [127, -127, 1, 0, 0]  # 0.5 -> 1, -0.5 -> 0 (floor(x + 0.5))


def test_quantize_bias_int16_with_bias_shift():
    # b32 = floor(1000 / (0.5 * 0.01) + 0.5) = 200000: numBits = ceil(log2 200000) + 1 = 19,
    # biasShift = 3, b16 = 200000 >> 3 = 25000; -1000 -> -200000 >> 3 = -25000.
    b16, shift = quantize_bias_int16([1000.0, -1000.0, 3.0], 0.5, 0.01)
    assert shift == 3
    assert b16.tolist() == [25000, -25000, 75]  # 600 >> 3 = 75
    b16, shift = quantize_bias_int16([1.0], 0.5, 0.01)
    assert (b16.tolist(), shift) == ([200], 0)


def test_bias_alignment_shift_from_the_seed_equation():
    # SF_bs * 2^k = SF_in * SF_wt / 2^cc_out_trunc: 0.5 * 0.25 / 2^1 / (1 / 128) = 8 -> k = 3.
    assert bias_alignment_shift(0.5, 0.25, 1 / 128, cc_out_trunc=1) == 3
    with pytest.raises(InvalidInputError, match="is not a power of two"):
        bias_alignment_shift(0.5, 0.3, 1 / 128)


def test_program_bn_mean_operands_and_shift_drive_an_x_unit():
    # -mean * SF_in = [-100 * 300, 2.5 * 300] = [-30000, 750]: fits int16, shift 0.
    ops, shift = program_bn_mean([100.0, -2.5], 300.0)
    assert (ops.tolist(), shift) == ([-30000, 750], 0)
    # -1000 * 300 = -300000 needs a shift of 4: -300000 >> 4 = -18750; op << 4 restores it.
    ops, shift = program_bn_mean([1000.0], 300.0)
    assert (ops.tolist(), shift) == ([-18750], 4)
    regs = SdpRegisters(BN_BYPASS=0, BN_ALU_BYPASS=0, BN_ALU_ALGO=2, BN_ALU_SRC=1,
                        BN_ALU_SHIFT_VALUE=shift, OUT_PRECISION=1)  # fmt: skip
    x = np.array([300000 + 5], dtype=np.int32)
    assert sdp(x, regs, operands={"BN_ALU": ops}).y.tolist() == [5]


@pytest.mark.parametrize("op", ["MAX", "SUM", "PROD"])
def test_ew_converter_fields_satisfy_the_seed_equations(op):
    o_in, sf_in, o_ew, sf_ew = 1.5, 40.0, -0.75, 12.0
    fields = ew_converter_fields(op, o_in=o_in, sf_in=sf_in, o_ew=o_ew, sf_ew=sf_ew)
    regs = SdpRegisters(**fields).y_unit().alu_cvt
    x = np.linspace(-3, 3, 13)
    v = np.round((x - o_ew) * sf_ew).astype(np.int64)  # the EW stream as stored
    y, _ = converter(v, offset=regs.offset, scale=regs.scale, shift=regs.truncate, bits=32)
    if op == "MAX":  # same offset and scale as the input stream
        expected = (x - o_in) * sf_in
    elif op == "SUM":  # same scale
        expected = (x - o_ew) * sf_in
    else:  # zero offset
        expected = x * sf_ew
    # v carries 1/2 LSB of rounding, scaled by SF_inv; the converter adds 1/2 more.
    assert np.max(np.abs(y - expected)) <= 0.5 * (sf_in / sf_ew if op != "PROD" else 1) + 0.51


def test_ew_converter_fields_reject_unknown_ops():
    with pytest.raises(InvalidInputError, match="MAX, SUM or PROD"):
        ew_converter_fields("MIN", o_in=0, sf_in=1, o_ew=0, sf_ew=1)


def test_cdp_converter_fields_make_the_lut_input_x_times_2_pow_m():
    # Stored input (x - 0.5) * 20; M = 4: DATIN_OFFSET = -0.5 * 20 = -10, SF = 16 / 20 = 0.8.
    f = cdp_converter_fields(o_in=0.5, sf_in=20.0, m=4, sf_lut=1024.0, o_out=0.0, sf_out=50.0,
                             precision=Precision.INT16)  # fmt: skip
    assert f["DATIN_OFFSET"] == (-10) % 65536
    x = np.array([0.5, 2.0, -3.0])
    stored = np.round((x - 0.5) * 20).astype(np.int64)
    scale = f["DATIN_SCALE"] - (f["DATIN_SCALE"] >= 32768) * 65536  # raw int16 -> signed
    c, _ = converter(stored, offset=-10, scale=scale, shift=f["DATIN_SHIFTER"], bits=17)
    assert c.tolist() == [8, 32, -48]  # x * 16


def test_padding_value_and_pdp_programming_compensate_a_zero_point():
    # Input encoded as (x - offset) * SF with offset -1.2, SF 10: a real 0 is stored as 12.
    pad = padding_value(-1.2, 10.0)
    assert pad == 12
    # Average pooling 3x3, pads 1 all round, of an all-"zero" cube: every window averages 12.
    regs = program_pdp((1, 3, 3), (3, 3), pads=(1, 1, 1, 1), pad_value=pad)
    x = np.full((1, 3, 3), 12, dtype=np.int8)
    assert pdp_avg(x, regs).tolist() == np.full((1, 3, 3), 12).tolist()
    assert regs.method is PoolingMethod.AVERAGE
    assert (regs.RECIP_KERNEL_WIDTH, regs.RECIP_KERNEL_HEIGHT) == (21845, 21845)


# --- CDMA -----------------------------------------------------------------------------------------


def test_cdma_convert_mean_scale_truncate_and_saturation():
    # (x - 10) * 3 >> 2: (20 - 10) * 3 = 30 -> 7.5 -> 8; (0 - 10) * 3 = -30 -> -8;
    # (255 - 10) * 3 = 735 -> 183.75 -> 184 -> int8 127.
    regs = CdmaCvtRegisters(CVT_EN=1, CVT_OFFSET=10, CVT_SCALE=3, CVT_TRUNCATE=2)
    assert cdma_convert(np.array([20, 0, 255]), regs).tolist() == [8, -8, 127]
    # Per-channel means (image input) replace CVT_OFFSET.
    y = cdma_convert(np.array([[20], [20]]), regs, mean=np.array([[10], [30]]))
    assert y.tolist() == [[8], [-8]]
    # Disabled: data pass unchanged.
    assert cdma_convert(np.array([5, -5]), CdmaCvtRegisters()).tolist() == [5, -5]


def test_cdma_convert_errors():
    with pytest.raises(InvalidInputError, match="CVT_EN = 0 passes data unchanged"):
        cdma_convert(np.array([200]), CdmaCvtRegisters())
    with pytest.raises(InvalidInputError, match="x must be an integer array"):
        cdma_convert(np.array([1.0]), CdmaCvtRegisters())
    with pytest.raises(InvalidInputError, match="does not broadcast"):
        cdma_convert(np.zeros(3, np.int8), CdmaCvtRegisters(CVT_EN=1), mean=np.zeros(2, np.int8))


# --- LUT programming ------------------------------------------------------------------------------


def test_seed_worked_example_range_100_to_300_with_257_entries():
    # x' = x * 256/200: START = 128, one input step per entry (select 0), so
    # LO[i] = f(100 + i * 200 / 256) exactly as the seed writes it.
    def f(x):
        return np.sqrt(np.maximum(x, 0.0))

    p = program_lut(f, in_scale=256 / 200, out_scale=1000.0, lo_range=(100.0, 300.0),
                    le_range=(0.0, 1000.0))  # fmt: skip
    i = np.arange(257)
    expected = np.floor(np.sqrt(100 + i * 200 / 256) * 1000 + 0.5)
    assert p.lo.tolist() == expected.astype(int).tolist()
    assert (p.fields["LUT_LO_START"], p.fields["LUT_LO_INDEX_SELECT"]) == (128, 0)
    assert p.fields["LUT_LO_END"] == 128 + 256
    # At the table's own inputs the emulated LUT returns the entries: error <= 1/2 LSB.
    err, _ = lut_error(p, f, 128 + i)
    assert err <= 0.5


def test_sigmoid_and_tanh_luts_report_small_table_errors():
    p, err = sigmoid_lut(in_scale=256)
    assert err < 4  # LSBs of 2^15 - 1, over [-24, 24]
    assert p.fields["LUT_HYBRID_PRIORITY"] == 1
    _, err = tanh_lut(in_scale=256)
    assert err < 6


def test_lrn_lut_programs_the_cdp_exponent_table():
    p, err = lrn_lut(m=2)
    assert p.unit is LutUnit.CDP
    assert p.fields["LUT_LE_FUNCTION"] == 0
    cfg = p.registers().lut()
    assert cfg.le_start == 0 and cfg.le_index_offset == 0
    assert err < 300  # ~1.5 % of 2^14: one LE entry per octave of the square sum
