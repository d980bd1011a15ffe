"""SDP: hand-derived goldens per unit (the arithmetic in comments), properties and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nvdla import SdpRegisters, sdp
from quantemu.backends.nvdla.operands import OPERANDS
from quantemu.backends.nvdla.sdp import x_unit, y_unit
from quantemu.errors import InvalidInputError

I32_MAX, I32_MIN = (1 << 31) - 1, -(1 << 31)
INT16 = {"OUT_PRECISION": 1}


def enc(v: int, bits: int) -> int:
    """Two's-complement field encoding of a signed value."""
    return v % (1 << bits)


def run(x, **fields):
    operands = {k: fields.pop(k) for k in list(fields) if k in OPERANDS}
    le, lo = fields.pop("LUT_LE", None), fields.pop("LUT_LO", None)
    x = np.array(x, dtype=np.int64)
    ops = {k: np.array(v, dtype=np.int16) for k, v in operands.items()}
    return sdp(x, SdpRegisters(**fields), operands=ops, lut_le=le, lut_lo=lo)


# --- output converter and pass-through ----------------------------------------------------------


def test_all_bypassed_int8_is_plain_saturation_and_not_counted():
    # 17-bit step holds all of these, so nothing is counted; the INT8 clamp is never counted.
    r = run([300, -300, 127, -129, 65535])
    assert r.y.tolist() == [127, -128, 127, -128, 127]
    assert r.y.dtype == np.int16
    assert r.OUT_SATURATION == 0


def test_output_converter_pm1_rule_on_the_17_bit_step():
    # 65536 = 2^16 floors one past the 17-bit max: clamped, not counted; 65537 counted.
    r = run([65536, 65537, -65537, -65538], **INT16)
    assert r.y.tolist() == [32767, 32767, -32768, -32768]
    assert r.OUT_SATURATION == 2


def test_output_converter_offset_scale_shift():
    # (x - (-5)) * 3 >> 2: (1+5)*3 = 18 -> 4.5 -> 5; (-10+5)*3 = -15 -> -3.75 -> -4.
    r = run([1, -10], CVT_OFFSET=enc(-5, 32), CVT_SCALE=3, CVT_SHIFT=2)
    assert r.y.tolist() == [5, -4]


# --- X units ------------------------------------------------------------------------------------


def test_bs_alu_sum_with_operand_shift_and_truncate_while_mul_bypassed():
    # op = 3 << 4 = 48; 10 + 48 = 58; MUL bypassed but the truncate by 2 still runs: 14.5 -> 15;
    # -70 + 48 = -22 -> -5.5 -> -6.
    r = run([10, -70], BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=2, BS_ALU_OPERAND=3,
            BS_ALU_SHIFT_VALUE=4, BS_MUL_SHIFT_VALUE=2)  # fmt: skip
    assert r.y.tolist() == [15, -6]


def test_bs_alu_algo_3_is_sum_and_operand_shift_saturates_to_int32():
    # op = -1 << 40 saturates to INT32_MIN; x + op = -2^31 + 5 (algo 3 = SUM).
    r = run([5], BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=3, BS_ALU_OPERAND=enc(-1, 16),
            BS_ALU_SHIFT_VALUE=40, CVT_SHIFT=16, **INT16)  # fmt: skip
    assert r.y.tolist() == [round((I32_MIN + 5) / 65536)]  # -32767.99 -> -32768


def test_bs_alu_max_min_from_memory():
    # MAX(x, mem): [0 vs 5, 0 vs -5] -> [5, 0]; MIN: [0, -5].
    common = {"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_SRC": 1, "BS_ALU": [5, -5]}
    assert run([0, 0], BS_ALU_ALGO=0, **common).y.tolist() == [5, 0]
    assert run([0, 0], BS_ALU_ALGO=1, **common).y.tolist() == [0, -5]


def test_mul_shift_value_uses_only_its_low_6_bits():
    # 7 * 3 = 21; shift 65 -> 1: 10.5 -> 11.
    r = run([7], BN_BYPASS=0, BN_MUL_BYPASS=0, BN_MUL_OPERAND=3, BN_MUL_SHIFT_VALUE=65)
    assert r.y.tolist() == [11]


def test_prelu_pass_through_wraps_a_33_bit_sum():
    # (2^31 - 1) + 1 = 2^31. PReLU keeps a >= 0 and WRAPS it: -2^31. The plain truncate path
    # (MUL bypassed) saturates it instead: 2^31 - 1. Negative a with PReLU: -10 * 3 >> 1 = -15.
    alu = {"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_ALGO": 2, "BS_ALU_OPERAND": 1}
    mul = {"BS_MUL_BYPASS": 0, "BS_MUL_PRELU": 1, "BS_MUL_OPERAND": 3, "BS_MUL_SHIFT_VALUE": 1}
    prelu = run([I32_MAX], CVT_SHIFT=16, **alu, **mul, **INT16)
    plain = run([I32_MAX], CVT_SHIFT=16, **alu, **INT16)
    assert prelu.y.tolist() == [-32768]  # -2^31 / 2^16
    assert plain.y.tolist() == [32767]  # (2^31 - 1) / 2^16 = 32767.99 -> 32768 -> 32767
    assert run([-11], **alu, **mul).y.tolist() == [-15]


def test_relu_clamps_negatives_after_the_truncate():
    r = run([-5, 5], BS_BYPASS=0, BS_RELU_BYPASS=0)
    assert r.y.tolist() == [0, 5]


def test_bs_then_bn_chain():
    # BS: x * 2 = 2x; BN: 2x + 7. x = 3 -> 13; x = -4 -> -1.
    r = run([3, -4], BS_BYPASS=0, BS_MUL_BYPASS=0, BS_MUL_OPERAND=2, BN_BYPASS=0,
            BN_ALU_BYPASS=0, BN_ALU_ALGO=2, BN_ALU_OPERAND=7)  # fmt: skip
    assert r.y.tolist() == [13, -1]


# --- Y unit -------------------------------------------------------------------------------------

EW = {"EW_BYPASS": 0}


def test_ew_multiplier_runs_before_the_alu():
    # (10 * 3) >> 1 = 15, then + 100 = 115 (ALU first would give (110 * 3) / 2 = 165).
    r = run([10], EW_MUL_BYPASS=0, EW_MUL_OPERAND=3, EW_TRUNCATE=1, EW_ALU_BYPASS=0,
            EW_ALU_ALGO=2, EW_ALU_OPERAND=100, **EW)  # fmt: skip
    assert r.y.tolist() == [115]


def test_ew_memory_operand_converter():
    # (7 - 2) * 3 = 15 >> 1 = 7.5 -> 8; 0 + 8 = 8. (-7 - 2) * 3 = -27 -> -13.5 -> -14.
    r = run([0, 0], EW_ALU_BYPASS=0, EW_ALU_ALGO=2, EW_ALU_SRC=1, EW_ALU_CVT_BYPASS=0,
            EW_ALU_CVT_OFFSET=2, EW_ALU_CVT_SCALE=3, EW_ALU_CVT_TRUNCATE=1, EW_ALU=[7, -7],
            **EW, **INT16)  # fmt: skip
    assert r.y.tolist() == [8, -14]


def test_ew_truncate_1023_rounds_everything_to_zero():
    r = run([I32_MAX], EW_MUL_BYPASS=0, EW_MUL_OPERAND=enc(I32_MIN, 32), EW_TRUNCATE=1023, **EW)
    assert r.y.tolist() == [0]


def test_ew_alu_sum_saturates_to_int32():
    r = run([I32_MAX], EW_ALU_BYPASS=0, EW_ALU_ALGO=2, EW_ALU_OPERAND=5, CVT_SHIFT=16, **EW,
            **INT16)  # fmt: skip
    assert r.y.tolist() == [32767]


def test_compare_mode_outputs_the_eql_bits_and_status():
    # EQL with operand 5: [5, 6] -> [0, 1]; STATUS_UNEQUAL = 1. The converter still counts:
    # (1 - 0) * 32767 << ... not saturated here. All equal -> STATUS_UNEQUAL 0.
    cmp = {"EW_ALU_BYPASS": 0, "EW_ALU_ALGO": 3, "EW_ALU_OPERAND": 5, **EW}
    r = run([5, 6], **cmp)
    assert r.y.tolist() == [0, 1]
    assert r.STATUS_UNEQUAL == 1
    assert run([5, 5], **cmp).STATUS_UNEQUAL == 0


def test_compare_mode_still_counts_the_converter_saturations():
    # v = 1 for x = 6: (1 - (-200000)) * 1 = 200001 > 2^16 + 1 -> counted, Y is still v = 1.
    r = run([6], EW_ALU_BYPASS=0, EW_ALU_ALGO=3, EW_ALU_OPERAND=5, CVT_OFFSET=enc(-200000, 32),
            **EW)  # fmt: skip
    assert r.y.tolist() == [1]
    assert r.OUT_SATURATION == 1


# --- LUT ----------------------------------------------------------------------------------------

LE0 = np.zeros(65, dtype=np.int16)
LO_RAMP = (100 * np.arange(257)).clip(-32768, 32767).astype(np.int16)
LUT = {"EW_LUT_BYPASS": 0, **EW, **INT16}


def test_lut_linear_hit_interpolates_with_half_away_rounding():
    # LO: START 0, select 2 (4 inputs per entry). x = 6: q = 1, frac = 2/4 -> (100 + 200) / 2
    # = 150. x = 5: 100 + 100/4 = 125. LE underflows (START 1000): exactly one hit -> LO.
    r = run([6, 5], LUT_LE_FUNCTION=1, LUT_LE_START=1000, LUT_LO_INDEX_SELECT=2,
            LUT_LE=LE0, LUT_LO=LO_RAMP, **LUT)  # fmt: skip
    assert r.y.tolist() == [150, 125]
    assert (r.LUT_HYBRID, r.LUT_LO_HIT, r.LUT_LE_HIT, r.LUT_UFLOW) == (2, 2, 0, 0)


def test_lut_tie_rounds_away_from_zero():
    # Entries -1, -2 with a half fraction: -1.5 -> -2; entries 1, 2: 1.5 -> 2.
    lo = np.zeros(257, dtype=np.int16)
    lo[1:3] = [-1, -2]
    lo[3:5] = [1, 2]
    r = run([6, 14], LUT_LE_FUNCTION=1, LUT_LE_START=1000, LUT_LO_INDEX_SELECT=2, LUT_LE=LE0,
            LUT_LO=lo, **LUT)  # fmt: skip
    assert r.y.tolist() == [-2, 2]


def test_lut_exponent_hit():
    # LE exponent, START 0, off 0: x = 12 -> e = 3, frac = (12 - 8) / 8 = 1/2 -> (T3 + T4) / 2.
    le = (10 * np.arange(65)).astype(np.int16)
    r = run([12, 1], LUT_LE_FUNCTION=0, LUT_LO_START=enc(5000, 32), LUT_LE=le,
            LUT_LO=LO_RAMP, **LUT)  # fmt: skip
    assert r.y.tolist() == [35, 0]  # x = 1: e = 0, frac 0 -> T[0]
    assert (r.LUT_LE_HIT, r.LUT_LO_HIT, r.LUT_HYBRID) == (2, 0, 2)


def test_lut_underflow_and_overflow_slopes():
    # Both underflow (UFLOW_PRIORITY = LO): 7 + rhaz((-10 - 0) * 3 / 2) = 7 - 15 = -8.
    # Both overflow (OFLOW_PRIORITY = LE): LE[64] + (2000 - 1000) * 1 << 2 = 64 + 4000.
    lo = np.full(257, 7, dtype=np.int16)
    le = np.arange(65, dtype=np.int16)
    r = run([-10, 2000], LUT_LE_FUNCTION=1, LUT_LE_INDEX_SELECT=2, LUT_LO_INDEX_SELECT=2,
            LUT_UFLOW_PRIORITY=1, LUT_OFLOW_PRIORITY=0, LUT_LO_SLOPE_UFLOW_SCALE=3,
            LUT_LO_SLOPE_UFLOW_SHIFT=1, LUT_LE_END=1000, LUT_LE_SLOPE_OFLOW_SCALE=1,
            LUT_LE_SLOPE_OFLOW_SHIFT=enc(-2, 5), LUT_LE=le, LUT_LO=lo, **LUT)  # fmt: skip
    assert r.y.tolist() == [-8, 4064]
    assert (r.LUT_UFLOW, r.LUT_OFLOW, r.LUT_HYBRID, r.LUT_LE_HIT, r.LUT_LO_HIT) == (1, 1, 0, 0, 0)


def test_lut_exponent_underflow_reference_adds_2_pow_off_only_for_positive_off():
    # off = 2: x = 3 -> e = 1 < 2: underflow, d = 3 - (0 + 4) = -1, y = 50 + (-1 * 10) = 40.
    # off = 0: x = 0 <= START: underflow, d = 0 - 0 = 0 -> 50.
    le = np.full(65, 50, dtype=np.int16)
    base = {"LUT_LE_FUNCTION": 0, "LUT_LE_SLOPE_UFLOW_SCALE": 10, "LUT_LO_START": enc(5000, 32)}
    r = run([3], LUT_LE_INDEX_OFFSET=2, LUT_LE=le, LUT_LO=LO_RAMP, **base, **LUT)
    assert r.y.tolist() == [40]
    r = run([0], LUT_LE_INDEX_OFFSET=0, LUT_LE=le, LUT_LO=LO_RAMP, **base, **LUT)
    assert r.y.tolist() == [50]


def test_lut_le_signed_fraction_quirk():
    # select 33, START -2^31, x = 2^31 - 1: u = 2^32 - 1, q = 0, d = u >= 2^31.
    # LE: d reads as u - 2^32 = -1 -> mod 2^35 = 2^35 - 1 -> frac = (d << 2) mod 2^35 = 2^35 - 4:
    #     T0 * 4/2^35 + T1 * (1 - 4/2^35) -> 1000 (rounded). LO (no quirk): frac = 2^34 - 4
    #     -> 500 - tiny -> 500.
    t = np.zeros(65, dtype=np.int16)
    t[1] = 1000
    lo = np.zeros(257, dtype=np.int16)
    lo[1] = 1000
    common = {"LUT_LE_FUNCTION": 1, "LUT_LE_INDEX_SELECT": 33, "LUT_LO_INDEX_SELECT": 33,
              "LUT_LE_START": enc(I32_MIN, 32), "LUT_LO_START": enc(I32_MIN, 32)}  # fmt: skip
    le_pick = run([I32_MAX], LUT_HYBRID_PRIORITY=0, LUT_LE=t, LUT_LO=lo, **common, **LUT)
    lo_pick = run([I32_MAX], LUT_HYBRID_PRIORITY=1, LUT_LE=t, LUT_LO=lo, **common, **LUT)
    assert (le_pick.y.tolist(), lo_pick.y.tolist()) == ([1000], [500])
    assert (le_pick.LUT_LE_HIT, le_pick.LUT_LO_HIT, le_pick.LUT_HYBRID) == (1, 1, 1)


@settings(max_examples=30, deadline=None)
@given(sel=st.integers(0, 8), start=st.integers(-5000, 5000), i=st.integers(1, 255))
def test_lut_interpolation_hits_table_entries_exactly_at_their_indices(sel, start, i):
    rng = np.random.default_rng(i)
    lo = rng.integers(-32768, 32768, 257).astype(np.int16)
    le = rng.integers(-32768, 32768, 65).astype(np.int16)
    x = start + (i << sel)  # the input that lands exactly on LO[i], fraction 0
    r = run([x], LUT_LE_FUNCTION=1, LUT_LE_START=enc(I32_MAX, 32), LUT_LO_START=enc(start, 32),
            LUT_LO_INDEX_SELECT=sel, LUT_LE=le, LUT_LO=lo, **LUT)  # fmt: skip
    assert r.y.tolist() == [int(lo[i])]
    # Exponent LE: x = START + 2^(off + j) lands on LE[j].
    j = i % 31
    r = run([start + (1 << j)], LUT_LE_FUNCTION=0, LUT_LE_START=enc(start, 32),
            LUT_LO_START=enc(I32_MAX, 32), LUT_LE=le, LUT_LO=lo, **LUT)  # fmt: skip
    assert r.y.tolist() == [int(le[j])]


# --- properties ---------------------------------------------------------------------------------

X32 = st.lists(st.integers(I32_MIN, I32_MAX), min_size=1, max_size=16)


@settings(max_examples=40, deadline=None)
@given(
    x=X32,
    fields=st.fixed_dictionaries(
        {"ALU_ALGO": st.integers(0, 3), "MUL_SHIFT_VALUE": st.integers(0, 255)},
        optional={n: st.integers(0, 1) for n in ("RELU_BYPASS", "ALU_BYPASS", "MUL_BYPASS")},
    ),
)
def test_a_bypassed_x_unit_is_the_identity(x, fields):
    regs = SdpRegisters(BS_BYPASS=1, **{f"BS_{k}": v for k, v in fields.items()})
    xa = np.array(x, dtype=np.int64)
    zeros = np.zeros_like(xa)
    assert x_unit(xa, regs.x_unit("BS"), zeros, zeros).tolist() == x


@settings(max_examples=40, deadline=None)
@given(x=st.lists(st.integers(-32768, 32767), min_size=1, max_size=16))
def test_a_fully_bypassed_sdp_with_identity_converter_is_the_identity_on_int16(x):
    # Unused fields of bypassed units are ignored (here: ALU algos and a MUL shift).
    regs = SdpRegisters(OUT_PRECISION=1, EW_ALU_ALGO=3, BS_ALU_ALGO=1, BN_MUL_SHIFT_VALUE=9)
    r = sdp(np.array(x, dtype=np.int16), regs)
    assert r.y.tolist() == x
    assert r.counters() == dict.fromkeys(r.counters(), 0)


def test_y_unit_with_everything_bypassed_is_the_identity():
    xa = np.array([I32_MIN, -1, 0, I32_MAX], dtype=np.int64)
    u = SdpRegisters(EW_BYPASS=0, EW_TRUNCATE=17).y_unit()
    assert y_unit(xa, u, xa * 0, xa * 0).tolist() == xa.tolist()


# --- input validation ---------------------------------------------------------------------------


def test_float_input_is_rejected():
    with pytest.raises(InvalidInputError, match="sdp: X must be an integer array, got dtype float"):
        sdp(np.array([1.0]), SdpRegisters())


def test_input_outside_int32_is_rejected():
    with pytest.raises(
        InvalidInputError, match=r"X values must fit int32 .* got \[0, 2147483648\]"
    ):
        sdp(np.array([0, 1 << 31]), SdpRegisters())


def test_operand_shape_and_range_and_names_are_checked():
    regs = SdpRegisters()
    with pytest.raises(InvalidInputError, match=r"BS_ALU has shape \(3,\); X has shape \(2,\)"):
        sdp(np.zeros(2, np.int32), regs, operands={"BS_ALU": np.zeros(3, np.int16)})
    with pytest.raises(InvalidInputError, match="EW_MUL values must fit int16"):
        sdp(np.zeros(1, np.int32), regs, operands={"EW_MUL": np.array([40000])})
    with pytest.raises(InvalidInputError, match=r"unknown operand\(s\) CVT"):
        sdp(np.zeros(1, np.int32), regs, operands={"CVT": np.zeros(1, np.int16)})


def test_active_lut_needs_valid_tables():
    regs = SdpRegisters(EW_BYPASS=0, EW_LUT_BYPASS=0)
    x = np.zeros(1, np.int32)
    with pytest.raises(InvalidInputError, match="LUT is active but LUT_LE is missing"):
        sdp(x, regs, lut_lo=np.zeros(257, np.int16))
    with pytest.raises(
        InvalidInputError, match=r"LUT_LO must be an integer array of shape \(257,\)"
    ):
        sdp(x, regs, lut_le=np.zeros(65, np.int16), lut_lo=np.zeros(256, np.int16))
    with pytest.raises(InvalidInputError, match="LUT_LE entries are int16"):
        sdp(x, regs, lut_le=np.full(65, 40000), lut_lo=np.zeros(257, np.int16))
