"""CDP register block (``conformance/nvdla.md`` §3.1)."""

from __future__ import annotations

from dataclasses import dataclass

from quantemu.backends.nvdla.registers.fields import RegisterBlock, field, sx
from quantemu.backends.nvdla.registers.sdp import slopes
from quantemu.backends.nvdla.registers.types import (
    Converter,
    LeFunction,
    LutConfig,
    Precision,
    Table,
    precision,
)


def cdp_index_select(raw: int, input_type: Precision) -> int:
    """Decode a CDP ``LUT_*_INDEX_SELECT`` (§3.3): the sign bit depends on the data type.

    INT8 reads bit 5 as the sign, INT16 bit 6. With the sign set, ``fb = raw mod 2^(b+1) -
    2^(b+1)`` (higher bits ignored); with it clear, ``fb = raw``, higher bits included.

    >>> cdp_index_select(0xFF, Precision.INT8), cdp_index_select(0xFF, Precision.INT16)
    (-1, -1)
    >>> cdp_index_select(0x9F, Precision.INT8), cdp_index_select(0x30, Precision.INT16)
    (159, 48)
    """
    b = 5 if input_type is Precision.INT8 else 6
    if raw >> b & 1:
        return raw % (1 << (b + 1)) - (1 << (b + 1))
    return raw


@dataclass(frozen=True)
class CdpRegisters(RegisterBlock):
    """CDP (LRN) fields, ``conformance/nvdla.md`` §3.1.

    LUT START/END are split into ``_LOW`` (32 bits) and ``_HIGH`` (6 bits): a 38-bit value.
    """

    UNIT = "CdpRegisters"

    INPUT_DATA_TYPE: int = field(2)
    NORMALZ_LEN: int = field(2)
    SQSUM_BYPASS: int = field(1)
    MUL_BYPASS: int = field(1)
    DATIN_OFFSET: int = field(16)
    DATIN_SCALE: int = field(16, 1)
    DATIN_SHIFTER: int = field(5)
    DATOUT_OFFSET: int = field(32)
    DATOUT_SCALE: int = field(16, 1)
    DATOUT_SHIFTER: int = field(6)
    LUT_LE_FUNCTION: int = field(1)
    LUT_UFLOW_PRIORITY: int = field(1)
    LUT_OFLOW_PRIORITY: int = field(1)
    LUT_HYBRID_PRIORITY: int = field(1)
    LUT_LE_INDEX_OFFSET: int = field(8)
    LUT_LE_INDEX_SELECT: int = field(8)
    LUT_LO_INDEX_SELECT: int = field(8)
    LUT_LE_START_LOW: int = field(32)
    LUT_LE_START_HIGH: int = field(6)
    LUT_LE_END_LOW: int = field(32)
    LUT_LE_END_HIGH: int = field(6)
    LUT_LO_START_LOW: int = field(32)
    LUT_LO_START_HIGH: int = field(6)
    LUT_LO_END_LOW: int = field(32)
    LUT_LO_END_HIGH: int = field(6)
    LUT_LE_SLOPE_UFLOW_SCALE: int = field(16)
    LUT_LE_SLOPE_OFLOW_SCALE: int = field(16)
    LUT_LE_SLOPE_UFLOW_SHIFT: int = field(5)
    LUT_LE_SLOPE_OFLOW_SHIFT: int = field(5)
    LUT_LO_SLOPE_UFLOW_SCALE: int = field(16)
    LUT_LO_SLOPE_OFLOW_SCALE: int = field(16)
    LUT_LO_SLOPE_UFLOW_SHIFT: int = field(5)
    LUT_LO_SLOPE_OFLOW_SHIFT: int = field(5)

    def _check(self) -> None:
        precision(self.UNIT, "INPUT_DATA_TYPE", self.INPUT_DATA_TYPE, fp16=True)

    @property
    def input_type(self) -> Precision:
        """INT8, INT16 or FP16 (``cdp_fp16``): the input and output data type."""
        return Precision(self.INPUT_DATA_TYPE)

    @property
    def half_window(self) -> int:
        """Channels on each side of the centre: NORMALZ_LEN 0/1/2/3 -> windows 3/5/7/9."""
        return self.NORMALZ_LEN + 1

    def input_converter(self) -> Converter:
        """``DATIN_*``; INT8 reads only the low byte of ``DATIN_OFFSET`` (§3.1)."""
        bits = 8 if self.input_type is Precision.INT8 else 16
        offset = sx(self.DATIN_OFFSET, bits)
        return Converter(offset, self.signed("DATIN_SCALE"), self.DATIN_SHIFTER)

    def output_converter(self) -> Converter:
        """``DATOUT_*``; INT8 reads ``DATOUT_OFFSET`` bits [24:0] as a signed 25-bit value."""
        bits = 25 if self.input_type is Precision.INT8 else 32
        offset = sx(self.DATOUT_OFFSET, bits)
        return Converter(offset, self.signed("DATOUT_SCALE"), self.DATOUT_SHIFTER)

    def _s38(self, name: str) -> int:
        return sx(getattr(self, f"{name}_HIGH") << 32 | getattr(self, f"{name}_LOW"), 38)

    def lut(self) -> LutConfig:
        """Decode the LUT registers: mode-dependent selects, 38-bit starts/ends (§3.3)."""
        t = self.input_type
        return LutConfig(
            le_function=LeFunction(self.LUT_LE_FUNCTION),
            le_index_offset=self.signed("LUT_LE_INDEX_OFFSET"),
            le_index_select=cdp_index_select(self.LUT_LE_INDEX_SELECT, t),
            lo_index_select=cdp_index_select(self.LUT_LO_INDEX_SELECT, t),
            le_start=self._s38("LUT_LE_START"),
            le_end=self._s38("LUT_LE_END"),
            lo_start=self._s38("LUT_LO_START"),
            lo_end=self._s38("LUT_LO_END"),
            uflow_priority=Table(self.LUT_UFLOW_PRIORITY),
            oflow_priority=Table(self.LUT_OFLOW_PRIORITY),
            hybrid_priority=Table(self.LUT_HYBRID_PRIORITY),
            **slopes(self),
        )
