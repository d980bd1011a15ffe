"""CDP (LRN): hand-derived goldens (arithmetic in comments), the cube API and errors."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends.nvdla import CdpRegisters, cdp, cdp_window, edge_fill
from quantemu.errors import InvalidInputError

RAMP_LO = np.arange(257, dtype=np.int16)  # LO[i] = i: with START 0, select 0, y = ss on hits
ZERO_LE = np.zeros(65, dtype=np.int16)
# LE linear with a huge START: always underflow, so a LO hit is "exactly one hit" -> LO.
IDENTITY_LUT = {"LUT_LE_FUNCTION": 1, "LUT_LE_START_LOW": 0xFFFFFFFF, "LUT_LE_START_HIGH": 31}


def enc(v: int, bits: int) -> int:
    return v % (1 << bits)


def run(x, le=ZERO_LE, lo=RAMP_LO, **fields):
    dtype = np.int8 if fields.get("INPUT_DATA_TYPE", 0) == 0 else np.int16
    return cdp_window(np.array(x, dtype=dtype), CdpRegisters(**fields), le, lo)


@pytest.mark.parametrize(("normalz_len", "ss"), [(0, 14), (1, 16), (2, 18), (3, 20)])
def test_square_sum_window_sizes(normalz_len, ss):
    # Output 0 is centred on X[4] = 2. Window 3: 1 + 4 + 9 = 14; each wider window adds two 1s.
    r = run([1, 1, 1, 1, 2, 3, 1, 1, 1], NORMALZ_LEN=normalz_len, MUL_BYPASS=1, **IDENTITY_LUT)
    assert r.y.tolist() == [ss]
    assert r.PERF_LUT_LO_HIT == 1


def test_multiply_by_the_centre_value():
    # ss = 14, y = LO[14] = 14, times the centre c = 2 -> 28.
    r = run([0, 0, 0, 1, 2, 3, 0, 0, 0], **IDENTITY_LUT)
    assert r.y.tolist() == [28]


def test_int8_input_converter_reads_the_low_byte_of_datin_offset_and_saturates_to_9_bits():
    # offset = low byte 0x05 = 5: (10 - 5) * 3 >> 1 = 7.5 -> 8 -> LO[8] = 8 (SQSUM bypassed).
    # offset 0x80 = -128: (127 + 128) * 4 = 1020 -> 9-bit max 255 -> clamped to LO[255] = 255
    # -> INT8 output 127 (floor 255 > 128: counted).
    fields = {"SQSUM_BYPASS": 1, "MUL_BYPASS": 1, **IDENTITY_LUT}
    r = run([0] * 4 + [10] + [0] * 4, DATIN_OFFSET=0x1205, DATIN_SCALE=3, DATIN_SHIFTER=1, **fields)
    assert r.y.tolist() == [8]
    r = run([0] * 4 + [127] + [0] * 4, DATIN_OFFSET=0x1280, DATIN_SCALE=4, **fields)
    assert r.y.tolist() == [127]
    assert r.OUT_SATURATION == 1


def test_output_converter_pm1_rule_and_25_bit_offset():
    # SQSUM bypassed: y = LO[c] = c; v = c * c. c = 11: 121 - (-7) = 128 -> 127, not counted;
    # c = 12: 144 + 7 = 151 -> 127, counted. DATOUT_OFFSET = 0xFE000000 | (-7 mod 2^25): only
    # bits [24:0] count in INT8.
    off = 0xFE000000 | enc(-7, 25)
    x = [0, 0, 0, 0, 11, 12, 0, 0, 0, 0]
    r = run(x, SQSUM_BYPASS=1, DATOUT_OFFSET=off, **IDENTITY_LUT)
    assert r.y.tolist() == [127, 127]
    assert r.OUT_SATURATION == 1


def test_lut_interpolation_16_bit_fraction_ties_away():
    # LO select 2: ss = 6 -> idx 1, f = 2 -> F16 = 2 << 14 = 32768 (one half).
    # LO[1] = 1, LO[2] = 2 -> 1 + rhaz(1 * 32768 / 65536) = 2; LO[1] = -1, LO[2] = -2 -> -2.
    lo = np.zeros(257, dtype=np.int16)
    lo[1:3] = [1, 2]
    x = [0, 0, 0, 0, 6, 0, 0, 0, 0]
    fields = {"SQSUM_BYPASS": 1, "MUL_BYPASS": 1, "LUT_LO_INDEX_SELECT": 2, **IDENTITY_LUT}
    assert run(x, lo=lo, **fields).y.tolist() == [2]
    lo[1:3] = [-1, -2]
    assert run(x, lo=lo, **fields).y.tolist() == [-2]


def test_exponent_underflow_reference_adds_one_when_offset_is_zero():
    # LE exponent, START 0, off 0: ss = 0 -> t = 0 -> underflow, d = 0 - 2^0 = -1:
    # LE[0] + (-1 * 10) = 50 - 10 = 40 (the SDP would use d = 0). LO underflows too (START 5),
    # both underflow with UFLOW_PRIORITY 0 -> LE; counted as PERF_LUT_UFLOW.
    le = np.full(65, 50, dtype=np.int16)
    r = run([0] * 9, le=le, LUT_LE_FUNCTION=0, LUT_LE_SLOPE_UFLOW_SCALE=10, LUT_LO_START_LOW=5,
            MUL_BYPASS=1, INPUT_DATA_TYPE=1)  # fmt: skip
    assert r.y.tolist() == [40]
    assert r.PERF_LUT_UFLOW == 1


def test_exponent_hit_on_a_38_bit_square_sum():
    # INT16, 9 channels of -32768: ss = 9 * 2^30 = 9663676416, e = 33, t - 2^33 = 2^30 ->
    # F16 = 2^30 >> 17 = 8192 (1/8). LE[33] = 800, LE[34] = 1600 -> 800 + 100 = 900.
    le = (np.arange(65) * 800 // 33).astype(np.int16)
    le[33], le[34] = 800, 1600
    r = run([-32768] * 9, le=le, INPUT_DATA_TYPE=1, NORMALZ_LEN=3, MUL_BYPASS=1,
            LUT_LO_START_LOW=0xFFFFFFFF, LUT_LO_START_HIGH=31)  # fmt: skip
    assert r.y.tolist() == [900]
    assert r.PERF_LUT_LE_HIT == 1


def test_counters_count_selection_cases():
    # LE linear START 0 select 0 over 65 entries; LO linear START 0 select 0 over 257.
    # ss (SQSUM bypassed) = c: 0 -> both underflow; 10 -> both hit (hybrid); 100 -> LE
    # overflow + LO hit (LO hit); 300 (INT16) -> both overflow.
    x = [0, 0, 0, 0, 0, 10, 100, 300, 0, 0, 0, 0]
    r = run(x, INPUT_DATA_TYPE=1, LUT_LE_FUNCTION=1, SQSUM_BYPASS=1, MUL_BYPASS=1)
    counts = (r.PERF_LUT_UFLOW, r.PERF_LUT_HYBRID, r.PERF_LUT_LO_HIT, r.PERF_LUT_OFLOW)
    assert counts == (1, 1, 1, 1)
    assert r.PERF_LUT_LE_HIT == 0
    # hybrid -> LE (LE[10] = 0); both overflow, OFLOW_PRIORITY 0 -> LE[64] + 0 * slope = 0
    assert r.y.tolist() == [0, 0, 100, 0]


def test_edge_fill_and_the_cube_api():
    # INT8 cube [C=2, H=1, W=2] with DATIN_OFFSET low byte 3: edges hold 3, which converts to 0.
    x = np.array([[[1, 2]], [[3, 4]]], dtype=np.int8)
    regs = CdpRegisters(DATIN_OFFSET=0x0103, **IDENTITY_LUT)
    r = cdp(x, regs, ZERO_LE, RAMP_LO)
    # pixel (0,0): channels [1, 3] -> c = [-2, 0]; window 3 with fill 0: ss0 = 4, ss1 = 4.
    # y = LO[ss] * c: [4 * -2, 4 * 0] = [-8, 0]; pixel (0,1): c = [-1, 1] -> ss 2, 2 -> [-2, 2].
    assert r.y.shape == (2, 1, 2)
    assert r.y[:, 0, 0].tolist() == [-8, 0]
    assert r.y[:, 0, 1].tolist() == [-2, 2]
    padded = np.pad(x[:, 0, 0], 4, constant_values=edge_fill(regs))
    assert cdp_window(padded, regs, ZERO_LE, RAMP_LO).y.tolist() == [-8, 0]


def test_edge_fill_int16_repeats_the_low_byte():
    assert edge_fill(CdpRegisters(INPUT_DATA_TYPE=1, DATIN_OFFSET=0x1281)) == -32383  # 0x8181


def test_input_validation():
    regs = CdpRegisters()
    with pytest.raises(InvalidInputError, match="X needs C \\+ 8 > 8 channels"):
        cdp_window(np.zeros(8, np.int8), regs, ZERO_LE, RAMP_LO)
    with pytest.raises(InvalidInputError, match=r"INPUT_DATA_TYPE = INT8 but X holds values"):
        cdp_window(np.full(9, 200, np.int16), regs, ZERO_LE, RAMP_LO)
    with pytest.raises(InvalidInputError, match="X must be an integer array"):
        cdp_window(np.zeros(9), regs, ZERO_LE, RAMP_LO)
    with pytest.raises(InvalidInputError, match="LUT_LO must be an integer array of shape"):
        cdp_window(np.zeros(9, np.int8), regs, ZERO_LE, RAMP_LO[:256])
