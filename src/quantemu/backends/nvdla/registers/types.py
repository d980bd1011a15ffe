"""Enums and decoded views shared by the NVDLA register blocks.

A register block stores raw fields; its ``decode`` methods return these typed views holding the
numbers the datapath actually uses (sign-extended operands, fields read with a width different
from the register's, enums for the variants).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quantemu.errors import InvalidInputError, UnsupportedError


class Precision(enum.IntEnum):
    """Precision of a unit (``*_PRECISION``, ``INPUT_DATA*``); FP16 (2) is emulated in the SDP
    only (``nvdla-fp16``)."""

    INT8 = 0
    INT16 = 1
    FP16 = 2


class AluAlgo(enum.IntEnum):
    """``*_ALU_ALGO``. In the X units (BS/BN) the encoding 3 behaves as ``SUM``."""

    MAX = 0
    MIN = 1
    SUM = 2
    EQL = 3


class OperandSource(enum.IntEnum):
    """``*_SRC``: the operand comes from its register or per element from memory."""

    REGISTER = 0
    MEMORY = 1


class LeFunction(enum.IntEnum):
    """``LUT_LE_FUNCTION``: indexing of the LE table (LO is always linear)."""

    EXPONENT = 0
    LINEAR = 1


class Table(enum.IntEnum):
    """A LUT priority field: which table's result wins."""

    LE = 0
    LO = 1


class PoolingMethod(enum.IntEnum):
    """PDP ``POOLING_METHOD``."""

    AVERAGE = 0
    MAX = 1
    MIN = 2


def precision(unit: str, name: str, value: int, *, fp16: bool = False) -> Precision:
    """Decode a 2-bit precision field: FP16 only where the unit emulates it (``fp16``), 3 is
    reserved."""
    if value == 2 and not fp16:
        raise UnsupportedError(
            f"{unit}: {name} = 2 selects FP16, which quantemu does not emulate (the conformance "
            "vectors cover INT8 and INT16 only); use 0 (INT8) or 1 (INT16)"
        )
    if value == 3:
        raise InvalidInputError(
            f"{unit}: {name} = 3 is a reserved encoding; use 0 (INT8) or 1 (INT16)"
        )
    return Precision(value)


# --- decoded views ------------------------------------------------------------------------------


@dataclass(frozen=True)
class XUnit:
    """Decoded BS (X1) or BN (X2) unit. ``mul_shift`` is ``MUL_SHIFT_VALUE mod 64``."""

    bypass: bool
    alu_bypass: bool
    alu_algo: AluAlgo
    alu_src: OperandSource
    alu_operand: int
    alu_shift: int
    mul_bypass: bool
    mul_src: OperandSource
    mul_operand: int
    mul_prelu: bool
    mul_shift: int
    relu_bypass: bool


@dataclass(frozen=True)
class EwConverter:
    """Converter of an EW operand read from memory: ``SHR((v - offset) * scale, truncate, 32)``."""

    bypass: bool
    offset: int
    scale: int
    truncate: int


@dataclass(frozen=True)
class YUnit:
    """Decoded EW (Y) unit; ``truncate`` is ``EW_TRUNCATE`` (0..1023)."""

    bypass: bool
    alu_bypass: bool
    alu_algo: AluAlgo
    alu_src: OperandSource
    alu_operand: int
    alu_cvt: EwConverter
    mul_bypass: bool
    mul_src: OperandSource
    mul_operand: int
    mul_prelu: bool
    mul_cvt: EwConverter
    truncate: int
    lut_bypass: bool


@dataclass(frozen=True)
class Slope:
    """An under/overflow slope: ``scale`` (int16) and ``shift`` (signed 5-bit, < 0 = left)."""

    scale: int
    shift: int


@dataclass(frozen=True)
class LutConfig:
    """The decoded hybrid-LUT registers shared in shape by SDP and CDP.

    ``le_index_select`` / ``lo_index_select`` are the decoded numbers of fraction bits (the SDP
    reads an int8, the CDP a mode-dependent sign bit); starts and ends are int32 (SDP) or 38-bit
    (CDP) values.
    """

    le_function: LeFunction
    le_index_offset: int
    le_index_select: int
    lo_index_select: int
    le_start: int
    le_end: int
    lo_start: int
    lo_end: int
    uflow_priority: Table
    oflow_priority: Table
    hybrid_priority: Table
    le_uflow: Slope
    le_oflow: Slope
    lo_uflow: Slope
    lo_oflow: Slope


@dataclass(frozen=True)
class Converter:
    """A decoded converter ``(x - offset) * scale`` rounded by ``shift`` (see :mod:`.precision`)."""

    offset: int
    scale: int
    shift: int


@dataclass(frozen=True)
class PdpGeometry:
    """Decoded PDP cube and kernel geometry (register values are sizes minus one)."""

    channels: int
    height: int
    width: int
    out_height: int
    out_width: int
    kernel_height: int
    kernel_width: int
    stride_height: int
    stride_width: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
