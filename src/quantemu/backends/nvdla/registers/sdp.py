"""SDP register block (``conformance/nvdla.md`` §2.1)."""

from __future__ import annotations

from dataclasses import dataclass

from quantemu.backends.nvdla.registers.fields import RegisterBlock, field, sx
from quantemu.backends.nvdla.registers.types import (
    AluAlgo,
    Converter,
    EwConverter,
    LeFunction,
    LutConfig,
    OperandSource,
    Precision,
    Slope,
    Table,
    XUnit,
    YUnit,
    precision,
)
from quantemu.errors import InvalidInputError, UnsupportedError


def slopes(block: RegisterBlock) -> dict[str, Slope]:
    out = {}
    for table in ("LE", "LO"):
        for kind in ("UFLOW", "OFLOW"):
            name = f"LUT_{table}_SLOPE_{kind}"
            out[f"{table.lower()}_{kind.lower()}"] = Slope(
                block.signed(f"{name}_SCALE"), block.signed(f"{name}_SHIFT")
            )
    return out


@dataclass(frozen=True)
class SdpRegisters(RegisterBlock):
    """SDP (single data point processor) fields, ``conformance/nvdla.md`` §2.1.

    Build from raw values, e.g. ``SdpRegisters(CVT_SCALE=3, CVT_SHIFT=1)`` or
    ``SdpRegisters.from_fields(attrs)``; a signed field takes its two's-complement encoding
    (``CVT_OFFSET=4294967291`` is -5).
    """

    UNIT = "SdpRegisters"

    PROC_PRECISION: int = field(2)
    OUT_PRECISION: int = field(2)
    BS_BYPASS: int = field(1, 1)
    BS_ALU_BYPASS: int = field(1, 1)
    BS_ALU_ALGO: int = field(2)
    BS_ALU_SRC: int = field(1)
    BS_ALU_OPERAND: int = field(16)
    BS_ALU_SHIFT_VALUE: int = field(6)
    BS_MUL_BYPASS: int = field(1, 1)
    BS_MUL_SRC: int = field(1)
    BS_MUL_OPERAND: int = field(16)
    BS_MUL_PRELU: int = field(1)
    BS_MUL_SHIFT_VALUE: int = field(8)
    BS_RELU_BYPASS: int = field(1, 1)
    BN_BYPASS: int = field(1, 1)
    BN_ALU_BYPASS: int = field(1, 1)
    BN_ALU_ALGO: int = field(2)
    BN_ALU_SRC: int = field(1)
    BN_ALU_OPERAND: int = field(16)
    BN_ALU_SHIFT_VALUE: int = field(6)
    BN_MUL_BYPASS: int = field(1, 1)
    BN_MUL_SRC: int = field(1)
    BN_MUL_OPERAND: int = field(16)
    BN_MUL_PRELU: int = field(1)
    BN_MUL_SHIFT_VALUE: int = field(8)
    BN_RELU_BYPASS: int = field(1, 1)
    EW_BYPASS: int = field(1, 1)
    EW_ALU_BYPASS: int = field(1, 1)
    EW_ALU_ALGO: int = field(2)
    EW_ALU_SRC: int = field(1)
    EW_ALU_OPERAND: int = field(32)
    EW_ALU_CVT_BYPASS: int = field(1, 1)
    EW_ALU_CVT_OFFSET: int = field(32)
    EW_ALU_CVT_SCALE: int = field(16, 1)
    EW_ALU_CVT_TRUNCATE: int = field(6)
    EW_MUL_BYPASS: int = field(1, 1)
    EW_MUL_SRC: int = field(1)
    EW_MUL_OPERAND: int = field(32)
    EW_MUL_PRELU: int = field(1)
    EW_MUL_CVT_BYPASS: int = field(1, 1)
    EW_MUL_CVT_OFFSET: int = field(32)
    EW_MUL_CVT_SCALE: int = field(16, 1)
    EW_MUL_CVT_TRUNCATE: int = field(6)
    EW_TRUNCATE: int = field(10)
    EW_LUT_BYPASS: int = field(1, 1)
    LUT_LE_FUNCTION: int = field(1)
    LUT_LE_START: int = field(32)
    LUT_LE_END: int = field(32)
    LUT_LE_INDEX_OFFSET: int = field(8)
    LUT_LE_INDEX_SELECT: int = field(8)
    LUT_LO_START: int = field(32)
    LUT_LO_END: int = field(32)
    LUT_LO_INDEX_SELECT: int = field(8)
    LUT_HYBRID_PRIORITY: int = field(1)
    LUT_UFLOW_PRIORITY: int = field(1)
    LUT_OFLOW_PRIORITY: int = field(1)
    LUT_LE_SLOPE_UFLOW_SCALE: int = field(16)
    LUT_LE_SLOPE_UFLOW_SHIFT: int = field(5)
    LUT_LE_SLOPE_OFLOW_SCALE: int = field(16)
    LUT_LE_SLOPE_OFLOW_SHIFT: int = field(5)
    LUT_LO_SLOPE_UFLOW_SCALE: int = field(16)
    LUT_LO_SLOPE_UFLOW_SHIFT: int = field(5)
    LUT_LO_SLOPE_OFLOW_SCALE: int = field(16)
    LUT_LO_SLOPE_OFLOW_SHIFT: int = field(5)
    CVT_OFFSET: int = field(32)
    CVT_SCALE: int = field(16, 1)
    CVT_SHIFT: int = field(6)
    # D_FEATURE_MODE_CFG.NAN_TO_ZERO (FP16 only: NaN inputs and fp16 operands become +0)
    NAN_TO_ZERO: int = field(1)

    def _check(self) -> None:
        proc = precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION, fp16=True)
        out = precision(self.UNIT, "OUT_PRECISION", self.OUT_PRECISION, fp16=True)
        if proc is Precision.FP16 and out is Precision.INT8:
            raise UnsupportedError(
                f"{self.UNIT}: PROC_PRECISION = FP16 with OUT_PRECISION = INT8 is not emulated: "
                "NVIDIA's C model leaves the fp16 word unconverted there (sdp_c.cpp), so it is "
                "probably not a supported configuration; use OUT_PRECISION = 1 (INT16) or 2 (FP16)"
            )

    @property
    def proc_precision(self) -> Precision:
        """The processing precision: INT8/INT16 (integer pipeline) or FP16."""
        return Precision(self.PROC_PRECISION)

    @property
    def out_precision(self) -> Precision:
        """The output word: INT8, INT16 (§2.5) or FP16."""
        return Precision(self.OUT_PRECISION)

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
        return LutConfig(
            le_function=LeFunction(self.LUT_LE_FUNCTION),
            le_index_offset=self.signed("LUT_LE_INDEX_OFFSET"),
            le_index_select=self.signed("LUT_LE_INDEX_SELECT"),
            lo_index_select=self.signed("LUT_LO_INDEX_SELECT"),
            le_start=self.signed("LUT_LE_START"),
            le_end=self.signed("LUT_LE_END"),
            lo_start=self.signed("LUT_LO_START"),
            lo_end=self.signed("LUT_LO_END"),
            uflow_priority=Table(self.LUT_UFLOW_PRIORITY),
            oflow_priority=Table(self.LUT_OFLOW_PRIORITY),
            hybrid_priority=Table(self.LUT_HYBRID_PRIORITY),
            **slopes(self),
        )

    def output_converter(self) -> Converter:
        """Decode the output converter C (§2.5)."""
        return Converter(self.signed("CVT_OFFSET"), self.signed("CVT_SCALE"), self.CVT_SHIFT)
