"""CACC output stage (§5) and CDMA input-converter register blocks."""

from __future__ import annotations

from quantemu.backends.nvdla.registers.fields import RegisterBlock, declare, enum_field
from quantemu.backends.nvdla.registers.types import Converter, Precision, precision
from quantemu.errors import InvalidInputError


@declare({"PROC_PRECISION": 2, "CLIP_TRUNCATE": 5})
class CaccRegisters(RegisterBlock):
    """CACC fields used by the accumulator's output stage (§5)."""

    UNIT = "CaccRegisters"

    def _check(self) -> None:
        precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION)
        if self.CLIP_TRUNCATE > 16:
            raise InvalidInputError(
                f"{self.UNIT}: CLIP_TRUNCATE = {self.CLIP_TRUNCATE} exceeds 16; the cmod rejects "
                "such a layer (the field is 5 bits but only right shifts 0..16 are legal)"
            )

    precision = enum_field("PROC_PRECISION", Precision, "INT8 or INT16 partial sums.")


@declare({"CVT_EN": 1, "CVT_TRUNCATE": 6, "CVT_OFFSET": 16, "CVT_SCALE": (16, 1),
          "PROC_PRECISION": 2})  # fmt: skip
class CdmaCvtRegisters(RegisterBlock):
    """CDMA input converter (``D_CVT_CFG``, ``D_CVT_OFFSET``, ``D_CVT_SCALE``) and output precision.

    ``CVT_OFFSET`` is the mean subtracted from every input (int16), ``CVT_SCALE`` an int16 and
    ``CVT_TRUNCATE`` an unsigned 6-bit right shift (``notes/toolchains.md``, NVDLA).
    """

    UNIT = "CdmaCvtRegisters"

    def _check(self) -> None:
        precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION)

    precision = enum_field(
        "PROC_PRECISION", Precision, "INT8 or INT16: the width the converted data saturates to."
    )

    def converter(self) -> Converter:
        """Decoded ``(offset, scale, truncate)``."""
        return Converter(self.signed("CVT_OFFSET"), self.signed("CVT_SCALE"), self.CVT_TRUNCATE)
