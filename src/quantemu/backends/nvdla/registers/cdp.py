"""CDP register block (``conformance/nvdla.md`` §3.1)."""

from __future__ import annotations

from quantemu.backends.nvdla.registers.fields import RegisterBlock, declare, enum_field, sx
from quantemu.backends.nvdla.registers.lut import lut_config, slope_fields
from quantemu.backends.nvdla.registers.types import Converter, LutConfig, Precision, precision


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


_FIELDS = {
    "INPUT_DATA_TYPE": 2, "NORMALZ_LEN": 2, "SQSUM_BYPASS": 1, "MUL_BYPASS": 1,
    "DATIN_OFFSET": 16, "DATIN_SCALE": (16, 1), "DATIN_SHIFTER": 5,
    "DATOUT_OFFSET": 32, "DATOUT_SCALE": (16, 1), "DATOUT_SHIFTER": 6,
    "LUT_LE_FUNCTION": 1, "LUT_UFLOW_PRIORITY": 1, "LUT_OFLOW_PRIORITY": 1,
    "LUT_HYBRID_PRIORITY": 1, "LUT_LE_INDEX_OFFSET": 8, "LUT_LE_INDEX_SELECT": 8,
    "LUT_LO_INDEX_SELECT": 8,
    **{f"LUT_{bound}_{half}": bits for bound in ("LE_START", "LE_END", "LO_START", "LO_END")
       for half, bits in (("LOW", 32), ("HIGH", 6))},
    **slope_fields(scales_first=True),
}  # fmt: skip


@declare(_FIELDS)
class CdpRegisters(RegisterBlock):
    """CDP (LRN) fields, ``conformance/nvdla.md`` §3.1.

    LUT START/END are split into ``_LOW`` (32 bits) and ``_HIGH`` (6 bits): a 38-bit value.
    """

    UNIT = "CdpRegisters"

    def _check(self) -> None:
        precision(self.UNIT, "INPUT_DATA_TYPE", self.INPUT_DATA_TYPE, fp16=True)

    input_type = enum_field(
        "INPUT_DATA_TYPE", Precision, "INT8, INT16 or FP16: the input and output data type."
    )

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
        return lut_config(
            self, select=lambda name: cdp_index_select(getattr(self, name), t), bound=self._s38
        )
