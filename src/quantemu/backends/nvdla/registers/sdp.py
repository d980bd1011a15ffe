"""SDP register block (``conformance/nvdla.md`` §2.1)."""

from __future__ import annotations

from quantemu.backends.nvdla.registers.fields import RegisterBlock, declare, enum_field, sx
from quantemu.backends.nvdla.registers.lut import lut_config, slope_fields
from quantemu.backends.nvdla.registers.types import (
    AluAlgo,
    Converter,
    EwConverter,
    LutConfig,
    OperandSource,
    Precision,
    XUnit,
    YUnit,
    precision,
)
from quantemu.errors import InvalidInputError, UnsupportedError


def _x_unit(u: str) -> dict:
    """The fields of the X unit ``u`` (BS or BN): the two are laid out alike (§2.1)."""
    return {
        f"{u}_BYPASS": (1, 1), f"{u}_ALU_BYPASS": (1, 1), f"{u}_ALU_ALGO": 2, f"{u}_ALU_SRC": 1,
        f"{u}_ALU_OPERAND": 16, f"{u}_ALU_SHIFT_VALUE": 6, f"{u}_MUL_BYPASS": (1, 1),
        f"{u}_MUL_SRC": 1, f"{u}_MUL_OPERAND": 16, f"{u}_MUL_PRELU": 1,
        f"{u}_MUL_SHIFT_VALUE": 8, f"{u}_RELU_BYPASS": (1, 1),
    }  # fmt: skip


def _ew_converter(op: str) -> dict:
    """The converter of the EW operand ``op`` (ALU or MUL) read from memory."""
    return {f"EW_{op}_CVT_BYPASS": (1, 1), f"EW_{op}_CVT_OFFSET": 32,
            f"EW_{op}_CVT_SCALE": (16, 1), f"EW_{op}_CVT_TRUNCATE": 6}  # fmt: skip


_FIELDS = {
    "PROC_PRECISION": 2, "OUT_PRECISION": 2,
    **_x_unit("BS"),
    **_x_unit("BN"),
    "EW_BYPASS": (1, 1), "EW_ALU_BYPASS": (1, 1), "EW_ALU_ALGO": 2, "EW_ALU_SRC": 1,
    "EW_ALU_OPERAND": 32,
    **_ew_converter("ALU"),
    "EW_MUL_BYPASS": (1, 1), "EW_MUL_SRC": 1, "EW_MUL_OPERAND": 32, "EW_MUL_PRELU": 1,
    **_ew_converter("MUL"),
    "EW_TRUNCATE": 10, "EW_LUT_BYPASS": (1, 1),
    "LUT_LE_FUNCTION": 1, "LUT_LE_START": 32, "LUT_LE_END": 32, "LUT_LE_INDEX_OFFSET": 8,
    "LUT_LE_INDEX_SELECT": 8, "LUT_LO_START": 32, "LUT_LO_END": 32, "LUT_LO_INDEX_SELECT": 8,
    "LUT_HYBRID_PRIORITY": 1, "LUT_UFLOW_PRIORITY": 1, "LUT_OFLOW_PRIORITY": 1,
    **slope_fields(scales_first=False),
    "CVT_OFFSET": 32, "CVT_SCALE": (16, 1), "CVT_SHIFT": 6,
    # D_FEATURE_MODE_CFG.NAN_TO_ZERO (FP16 only: NaN inputs and fp16 operands become +0)
    "NAN_TO_ZERO": 1,
}  # fmt: skip


@declare(_FIELDS)
class SdpRegisters(RegisterBlock):
    """SDP (single data point processor) fields, ``conformance/nvdla.md`` §2.1.

    Build from raw values, e.g. ``SdpRegisters(CVT_SCALE=3, CVT_SHIFT=1)`` or
    ``SdpRegisters.from_fields(attrs)``; a signed field takes its two's-complement encoding
    (``CVT_OFFSET=4294967291`` is -5). The fields are the table above, in its order: the BS and
    BN units have the same fields, and so have the EW ALU and MUL operands' converters.
    """

    UNIT = "SdpRegisters"

    def _check(self) -> None:
        proc = precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION, fp16=True)
        out = precision(self.UNIT, "OUT_PRECISION", self.OUT_PRECISION, fp16=True)
        if proc is Precision.FP16 and out is Precision.INT8:
            raise UnsupportedError(
                f"{self.UNIT}: PROC_PRECISION = FP16 with OUT_PRECISION = INT8 is not emulated: "
                "NVIDIA's C model leaves the fp16 word unconverted there (sdp_c.cpp), so it is "
                "probably not a supported configuration; use OUT_PRECISION = 1 (INT16) or 2 (FP16)"
            )

    proc_precision = enum_field(
        "PROC_PRECISION", Precision, "The processing precision: INT8/INT16 (integer) or FP16."
    )
    out_precision = enum_field("OUT_PRECISION", Precision, "The output word: INT8, INT16 or FP16.")

    @property
    def compare_mode(self) -> bool:
        """EW ALU in EQL mode (§2.6): Y is the raw value wrapped to 16 bits."""
        return not self.EW_BYPASS and not self.EW_ALU_BYPASS and self.EW_ALU_ALGO == AluAlgo.EQL

    @property
    def lut_active(self) -> bool:
        """The LUT runs: EW enabled and ``EW_LUT_BYPASS = 0``."""
        return not self.EW_BYPASS and not self.EW_LUT_BYPASS

    def x_unit(self, unit: str) -> XUnit:
        """Decode ``"BS"`` (X1) or ``"BN"`` (X2); ALU_ALGO 3 reads as SUM there (§2.1)."""
        if unit not in ("BS", "BN"):
            raise InvalidInputError(f"{self.UNIT}.x_unit: unit must be 'BS' or 'BN', got {unit!r}")

        def g(name: str) -> int:
            return getattr(self, f"{unit}_{name}")

        algo = AluAlgo(g("ALU_ALGO"))
        return XUnit(
            bypass=bool(g("BYPASS")),
            alu_bypass=bool(g("ALU_BYPASS")),
            alu_algo=AluAlgo.SUM if algo is AluAlgo.EQL else algo,
            alu_src=OperandSource(g("ALU_SRC")),
            alu_operand=sx(g("ALU_OPERAND"), 16),
            alu_shift=g("ALU_SHIFT_VALUE"),
            mul_bypass=bool(g("MUL_BYPASS")),
            mul_src=OperandSource(g("MUL_SRC")),
            mul_operand=sx(g("MUL_OPERAND"), 16),
            mul_prelu=bool(g("MUL_PRELU")),
            mul_shift=g("MUL_SHIFT_VALUE") % 64,  # only the low 6 bits are wired (§2.1)
            relu_bypass=bool(g("RELU_BYPASS")),
        )

    def _ew_cvt(self, which: str) -> EwConverter:
        return EwConverter(
            bypass=bool(getattr(self, f"EW_{which}_CVT_BYPASS")),
            offset=self.signed(f"EW_{which}_CVT_OFFSET"),
            scale=self.signed(f"EW_{which}_CVT_SCALE"),
            truncate=getattr(self, f"EW_{which}_CVT_TRUNCATE"),
        )

    def y_unit(self) -> YUnit:
        """Decode the EW (Y) unit."""
        return YUnit(
            bypass=bool(self.EW_BYPASS),
            alu_bypass=bool(self.EW_ALU_BYPASS),
            alu_algo=AluAlgo(self.EW_ALU_ALGO),
            alu_src=OperandSource(self.EW_ALU_SRC),
            alu_operand=self.signed("EW_ALU_OPERAND"),
            alu_cvt=self._ew_cvt("ALU"),
            mul_bypass=bool(self.EW_MUL_BYPASS),
            mul_src=OperandSource(self.EW_MUL_SRC),
            mul_operand=self.signed("EW_MUL_OPERAND"),
            mul_prelu=bool(self.EW_MUL_PRELU),
            mul_cvt=self._ew_cvt("MUL"),
            truncate=self.EW_TRUNCATE,
            lut_bypass=bool(self.EW_LUT_BYPASS),
        )

    def lut(self) -> LutConfig:
        """Decode the LUT registers: int8 selects/offset, int32 starts/ends (§2.4)."""
        return lut_config(self, select=self.signed, bound=self.signed)

    def output_converter(self) -> Converter:
        """Decode the output converter C (§2.5)."""
        return Converter(self.signed("CVT_OFFSET"), self.signed("CVT_SCALE"), self.CVT_SHIFT)
