"""Register blocks: width validation of every field, constraints, and the hardware decodings."""

from __future__ import annotations

import pytest

from quantemu.backends.nvdla import (
    AluAlgo,
    CaccRegisters,
    CdmaCvtRegisters,
    CdpRegisters,
    PdpRegisters,
    Precision,
    SdpRegisters,
)
from quantemu.backends.nvdla.registers import cdp_index_select, sx
from quantemu.errors import InvalidInputError, UnsupportedError

BLOCKS = [SdpRegisters, CdpRegisters, PdpRegisters, CaccRegisters, CdmaCvtRegisters]
ALL_FIELDS = [(b, name, bits) for b in BLOCKS for name, bits in b.widths().items()]


@pytest.mark.parametrize(("block", "name", "bits"), ALL_FIELDS, ids=lambda v: getattr(v, "UNIT", v))
def test_every_field_rejects_a_value_one_past_its_width(block, name, bits):
    with pytest.raises(InvalidInputError) as err:
        block(**{name: 1 << bits})
    msg = str(err.value)
    assert f"{name} = {1 << bits}" in msg
    assert f"{bits}-bit field" in msg
    assert block.UNIT in msg


@pytest.mark.parametrize(("block", "name", "bits"), ALL_FIELDS, ids=lambda v: getattr(v, "UNIT", v))
def test_every_field_rejects_negative_values_with_the_encoding_hint(block, name, bits):
    with pytest.raises(
        InvalidInputError, match=rf"{name} = -1 does not fit .* -1 is {(1 << bits) - 1}"
    ):
        block(**{name: -1})


def test_the_largest_raw_value_of_a_free_field_is_accepted():
    r = SdpRegisters(CVT_OFFSET=(1 << 32) - 1, LUT_LE_INDEX_SELECT=255, BS_MUL_SHIFT_VALUE=255)
    assert r.CVT_OFFSET == 4294967295  # stored raw, as software wrote it
    assert r.signed("CVT_OFFSET") == -1


@pytest.mark.parametrize("value", [1.0, True, "3", None])
def test_non_int_field_values_are_rejected(value):
    with pytest.raises(InvalidInputError, match="field CVT_SHIFT must be an int"):
        SdpRegisters(CVT_SHIFT=value)


def test_numpy_ints_are_normalised_to_python_ints():
    np = pytest.importorskip("numpy")
    r = SdpRegisters(CVT_SHIFT=np.uint8(3))
    assert type(r.CVT_SHIFT) is int


def test_from_fields_rejects_unknown_names_and_lists_the_known_ones():
    with pytest.raises(InvalidInputError, match=r"unknown field\(s\) CVT_SHIFTER; the fields are"):
        SdpRegisters.from_fields({"CVT_SHIFTER": 1})


def test_from_fields_complete_requires_every_field():
    with pytest.raises(InvalidInputError, match=r"CaccRegisters: missing field\(s\) CLIP_TRUNCATE"):
        CaccRegisters.from_fields({"PROC_PRECISION": 0}, complete=True)


def test_blocks_are_frozen():
    r = CaccRegisters()
    with pytest.raises(AttributeError):
        r.CLIP_TRUNCATE = 3


@pytest.mark.parametrize(
    ("block", "name"),
    [
        (CaccRegisters, "PROC_PRECISION"),
        (CdmaCvtRegisters, "PROC_PRECISION"),
    ],
)
def test_fp16_is_unsupported_and_3_is_reserved(block, name):
    with pytest.raises(UnsupportedError, match=f"{name} = 2 selects FP16"):
        block(**{name: 2})
    with pytest.raises(InvalidInputError, match=f"{name} = 3 is a reserved encoding"):
        block(**{name: 3})


@pytest.mark.parametrize("name", ["PROC_PRECISION", "OUT_PRECISION"])
def test_sdp_takes_fp16_and_3_is_reserved(name):
    assert SdpRegisters(PROC_PRECISION=2, OUT_PRECISION=2).proc_precision.name == "FP16"
    assert SdpRegisters(OUT_PRECISION=2).out_precision.name == "FP16"
    with pytest.raises(InvalidInputError, match=f"{name} = 3 is a reserved encoding"):
        SdpRegisters(**{name: 3})


def test_sdp_fp16_to_int8_output_is_refused_with_the_reason():
    with pytest.raises(UnsupportedError, match="leaves the fp16 word unconverted"):
        SdpRegisters(PROC_PRECISION=2, OUT_PRECISION=0)


def test_pdp_pooling_method_3_is_reserved():
    with pytest.raises(InvalidInputError, match="POOLING_METHOD = 3 is reserved"):
        PdpRegisters(POOLING_METHOD=3)


def test_pdp_split_width_mode_is_unsupported():
    with pytest.raises(UnsupportedError, match="SPLIT_NUM = 1: split-width mode"):
        PdpRegisters(SPLIT_NUM=1)


@pytest.mark.parametrize("side", ["PAD_LEFT", "PAD_RIGHT", "PAD_TOP", "PAD_BOTTOM"])
def test_pdp_padding_not_smaller_than_the_kernel_is_unsupported(side):
    # 2x2 kernel on a 4x4 cube: a pad of 2 makes windows of padding only.
    geo = {"CUBE_IN_WIDTH": 3, "CUBE_IN_HEIGHT": 3, "KERNEL_WIDTH": 1, "KERNEL_HEIGHT": 1}
    with pytest.raises(UnsupportedError, match=f"{side} = 2 is not smaller than the kernel"):
        PdpRegisters(**geo, **{side: 2})


def test_pdp_inconsistent_output_size_names_the_expected_value():
    # W = 5, pads 1 + 0, kernel 3, stride 2: (5 + 1 - 3) // 2 + 1 = 2 -> CUBE_OUT_WIDTH = 1.
    geo = {"CUBE_IN_WIDTH": 4, "KERNEL_WIDTH": 2, "KERNEL_STRIDE_WIDTH": 1, "PAD_LEFT": 1}
    assert PdpRegisters(**geo, CUBE_OUT_WIDTH=1).geometry().out_width == 2
    with pytest.raises(InvalidInputError, match="program CUBE_OUT_WIDTH = 1"):
        PdpRegisters(**geo, CUBE_OUT_WIDTH=2)
    with pytest.raises(InvalidInputError, match="program CUBE_OUT_HEIGHT = 0"):
        PdpRegisters(CUBE_OUT_HEIGHT=3)


def test_pdp_channel_counts_must_agree():
    with pytest.raises(
        InvalidInputError, match="CUBE_OUT_CHANNEL = 0 differs from CUBE_IN_CHANNEL = 3"
    ):
        PdpRegisters(CUBE_IN_CHANNEL=3)


def test_cacc_clip_truncate_above_16_is_rejected_like_the_cmod():
    assert CaccRegisters(CLIP_TRUNCATE=16).CLIP_TRUNCATE == 16
    with pytest.raises(InvalidInputError, match="CLIP_TRUNCATE = 17 exceeds 16"):
        CaccRegisters(CLIP_TRUNCATE=17)


def test_x_unit_name_is_checked():
    with pytest.raises(InvalidInputError, match="unit must be 'BS' or 'BN', got 'EW'"):
        SdpRegisters().x_unit("EW")


# --- decodings ----------------------------------------------------------------------------------


def test_sx_reads_two_complement():
    assert [sx(v, 8) for v in (0, 127, 128, 255)] == [0, 127, -128, -1]
    assert sx(4294967291, 32) == -5


def test_x_unit_decoding_mul_shift_mod_64_and_algo_3_as_sum():
    r = SdpRegisters(BS_MUL_SHIFT_VALUE=172, BS_ALU_ALGO=3, BS_ALU_OPERAND=0xFFFE, BN_ALU_ALGO=3)
    bs = r.x_unit("BS")
    assert bs.mul_shift == 172 - 128  # only the low 6 bits are used
    assert bs.alu_algo is AluAlgo.SUM
    assert bs.alu_operand == -2
    assert r.x_unit("BN").alu_algo is AluAlgo.SUM
    assert SdpRegisters(EW_ALU_ALGO=3).y_unit().alu_algo is AluAlgo.EQL  # not in EW


def test_sdp_lut_decoding_int8_selects_and_signed_5_bit_shifts():
    cfg = SdpRegisters(
        LUT_LE_INDEX_SELECT=0x80,
        LUT_LO_INDEX_SELECT=0x7F,
        LUT_LE_INDEX_OFFSET=0xFF,
        LUT_LO_START=0xFFFFFFFF,
        LUT_LE_SLOPE_UFLOW_SHIFT=16,
        LUT_LO_SLOPE_OFLOW_SHIFT=15,
        LUT_LE_SLOPE_OFLOW_SCALE=0x8000,
    ).lut()
    assert (cfg.le_index_select, cfg.lo_index_select, cfg.le_index_offset) == (-128, 127, -1)
    assert cfg.lo_start == -1
    assert cfg.le_uflow.shift == -16  # 16..31 mean -16..-1 (left shifts)
    assert cfg.lo_oflow.shift == 15
    assert cfg.le_oflow.scale == -32768


def test_cdp_converter_offsets_read_with_mode_dependent_widths():
    # INT8: only the low byte of DATIN_OFFSET, as int8; DATOUT_OFFSET bits [24:0] as int25.
    r8 = CdpRegisters(DATIN_OFFSET=0x1280, DATOUT_OFFSET=0xFF000000 | 0x01FFFFFF)
    assert r8.input_converter().offset == -128
    assert r8.output_converter().offset == -1
    r16 = CdpRegisters(INPUT_DATA_TYPE=1, DATIN_OFFSET=0x1280, DATOUT_OFFSET=0x01FFFFFF)
    assert r16.input_converter().offset == 0x1280
    assert r16.output_converter().offset == 0x01FFFFFF


def test_cdp_index_select_sign_bit_depends_on_the_data_type():
    # INT8: bit 5 is the sign; INT16: bit 6. Higher bits are kept when the sign is clear.
    assert cdp_index_select(0x20, Precision.INT8) == -32
    assert cdp_index_select(0x20, Precision.INT16) == 32
    assert cdp_index_select(0x3F, Precision.INT8) == -1
    assert cdp_index_select(0xE8, Precision.INT8) == 0x28 - 64  # bits 7, 6 ignored: -24
    assert cdp_index_select(0x9E, Precision.INT8) == 0x9E  # sign clear: 158, high bit kept
    assert cdp_index_select(0x48, Precision.INT16) == 0x48 - 128


def test_cdp_starts_and_ends_are_38_bit_signed():
    cfg = CdpRegisters(
        LUT_LE_START_HIGH=63,
        LUT_LE_START_LOW=0xFFFFFFFF,
        LUT_LO_END_HIGH=32,
        LUT_LE_END_HIGH=31,
        LUT_LE_END_LOW=0xFFFFFFFF,
    ).lut()
    assert cfg.le_start == -1
    assert cfg.lo_end == -(1 << 37)
    assert cfg.le_end == (1 << 37) - 1


def test_pdp_pad_values_sign_extend_from_a_per_n_bit_and_keep_high_bits():
    r = PdpRegisters(
        PAD_VALUE_1X=0x80, PAD_VALUE_2X=0x100, PAD_VALUE_3X=0x7FFFF, PAD_VALUE_7X=0x400
    )
    pads = r.pad_values()
    assert pads[0] == 0
    assert pads[1] == -128  # INT8 n=1: bit 7 is the sign
    assert pads[2] == -256  # n=2: bit 8
    assert pads[3] == -1  # n=3: bit 9 set -> all ones
    assert pads[7] == -1024  # n=7: bit 10
    # Sign bit clear: higher raw bits stay, then the value wraps to the 16-bit accumulator.
    assert PdpRegisters(PAD_VALUE_1X=0x40100).pad_values()[1] == 0x0100
    r16 = PdpRegisters(INPUT_DATA=1, PAD_VALUE_1X=0x8000, PAD_VALUE_4X=0x40000)
    assert r16.pad_values()[1] == -32768  # INT16 n=1: bit 15
    assert r16.pad_values()[4] == 0x40000  # n=4: sign bit 17 clear, bit 18 kept (32-bit acc)


def test_defaults_are_a_pass_through_configuration():
    r = SdpRegisters()
    assert r.x_unit("BS").bypass and r.x_unit("BN").bypass and r.EW_BYPASS
    c = r.output_converter()
    assert (c.offset, c.scale, c.shift) == (0, 1, 0)
    assert not r.compare_mode and not r.lut_active
    assert PdpRegisters().geometry().kernel_width == 1
