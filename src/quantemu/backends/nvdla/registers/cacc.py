"""CACC output stage (§5) and CDMA input-converter register blocks."""

from __future__ import annotations

from dataclasses import dataclass

from quantemu.backends.nvdla.registers.fields import RegisterBlock, field
from quantemu.backends.nvdla.registers.types import Converter, Precision, precision
from quantemu.errors import InvalidInputError


@dataclass(frozen=True)
class CaccRegisters(RegisterBlock):
    """CACC fields used by the accumulator's output stage (§5)."""

    UNIT = "CaccRegisters"

    PROC_PRECISION: int = field(2)
    CLIP_TRUNCATE: int = field(5)

    def _check(self) -> None:
        precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION)
        if self.CLIP_TRUNCATE > 16:
            raise InvalidInputError(
                f"{self.UNIT}: CLIP_TRUNCATE = {self.CLIP_TRUNCATE} exceeds 16; the cmod rejects "
                "such a layer (the field is 5 bits but only right shifts 0..16 are legal)"
            )

    @property
    def precision(self) -> Precision:
        """INT8 or INT16 partial sums."""
        return Precision(self.PROC_PRECISION)


@dataclass(frozen=True)
class CdmaCvtRegisters(RegisterBlock):
    """CDMA input converter (``D_CVT_CFG``, ``D_CVT_OFFSET``, ``D_CVT_SCALE``) and output precision.

    ``CVT_OFFSET`` is the mean subtracted from every input (int16), ``CVT_SCALE`` an int16 and
    ``CVT_TRUNCATE`` an unsigned 6-bit right shift (``notes/toolchains.md``, NVDLA).
    """

    UNIT = "CdmaCvtRegisters"

    CVT_EN: int = field(1)
    CVT_TRUNCATE: int = field(6)
    CVT_OFFSET: int = field(16)
    CVT_SCALE: int = field(16, 1)
    PROC_PRECISION: int = field(2)

    def _check(self) -> None:
        precision(self.UNIT, "PROC_PRECISION", self.PROC_PRECISION)

    @property
    def precision(self) -> Precision:
        """INT8 or INT16: the width the converted data saturates to."""
        return Precision(self.PROC_PRECISION)

    def converter(self) -> Converter:
        """Decoded ``(offset, scale, truncate)``."""
        return Converter(self.signed("CVT_OFFSET"), self.signed("CVT_SCALE"), self.CVT_TRUNCATE)
