"""The hybrid-LUT registers the SDP and the CDP share (``conformance/nvdla.md`` §2.4, §3.3).

Both units program an LE and an LO table with the same fields (function, index offset and
selects, priorities, under/overflow slopes); they differ in how START/END are stored (SDP int32,
CDP 38 bits split into ``_LOW``/``_HIGH``), in how a select is read, and in field order. The
slope fields are declared by :func:`slope_fields`; :func:`lut_config` decodes any of the two.
"""

from __future__ import annotations

from collections.abc import Callable

from quantemu.backends.nvdla.registers.fields import RegisterBlock, Width
from quantemu.backends.nvdla.registers.types import LeFunction, LutConfig, Slope, Table

_TABLES = ("LE", "LO")
_KINDS = ("UFLOW", "OFLOW")
_PARTS = (("SCALE", 16), ("SHIFT", 5))  # an int16 scale, a signed 5-bit shift


def slope_fields(*, scales_first: bool) -> dict[str, Width]:
    """The eight fields ``LUT_{LE,LO}_SLOPE_{UFLOW,OFLOW}_{SCALE,SHIFT}`` in a unit's order: per
    table, scale and shift of each kind (SDP), or both scales then both shifts (CDP)."""
    if scales_first:
        order = [(kind, part) for part in _PARTS for kind in _KINDS]
    else:
        order = [(kind, part) for kind in _KINDS for part in _PARTS]
    return {
        f"LUT_{table}_SLOPE_{kind}_{part}": bits
        for table in _TABLES
        for kind, (part, bits) in order
    }


def _slopes(block: RegisterBlock) -> dict[str, Slope]:
    return {
        f"{table.lower()}_{kind.lower()}": Slope(
            block.signed(f"LUT_{table}_SLOPE_{kind}_SCALE"),
            block.signed(f"LUT_{table}_SLOPE_{kind}_SHIFT"),
        )
        for table in _TABLES
        for kind in _KINDS
    }


def lut_config(
    block: RegisterBlock, *, select: Callable[[str], int], bound: Callable[[str], int]
) -> LutConfig:
    """Decode ``block``'s LUT registers: ``select(name)`` reads an ``_INDEX_SELECT`` field,
    ``bound(name)`` a START or END (``LUT_LE_START`` ...), each as the unit does."""
    return LutConfig(
        le_function=LeFunction(block.LUT_LE_FUNCTION),
        le_index_offset=block.signed("LUT_LE_INDEX_OFFSET"),
        le_index_select=select("LUT_LE_INDEX_SELECT"),
        lo_index_select=select("LUT_LO_INDEX_SELECT"),
        le_start=bound("LUT_LE_START"),
        le_end=bound("LUT_LE_END"),
        lo_start=bound("LUT_LO_START"),
        lo_end=bound("LUT_LO_END"),
        uflow_priority=Table(block.LUT_UFLOW_PRIORITY),
        oflow_priority=Table(block.LUT_OFLOW_PRIORITY),
        hybrid_priority=Table(block.LUT_HYBRID_PRIORITY),
        **_slopes(block),
    )
