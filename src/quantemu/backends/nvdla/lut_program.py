"""LUT programming: fill the LE/LO tables and slope registers for a function and an input range.

NVIDIA's open compiler fills only FP16 LUTs and leaves integer ones empty
(``notes/toolchains.md``), so this is quantemu's own rule, built from seed 001's programming
equations ("LUT[0] = f(100), LUT[1] = f(100 + 200/256), ..., LUT[256] = f(300)"):

* the LUT input is the integer ``x_int = x * in_scale``, the table entries are
  ``round(f(x) * out_scale)`` saturated to int16 (half away from zero);
* a **linear** table of ``depth`` entries over ``[lo, hi]`` uses the power-of-two step
  ``2^sel >= (hi - lo) * in_scale / (depth - 1)`` and ``START = floor(lo * in_scale)``, so it
  covers at least the range; ``END = START + (depth - 1) * 2^sel``;
* an **exponent** LE table puts entry ``i`` at ``START + 2^(offset + i)``;
* the under/overflow slopes are the secants of ``f`` over one table step outside each end,
  written as ``scale * 2^-shift`` with an int16 scale and a shift in ``[-16, 15]``.

:func:`lut_error` measures the table error through quantemu's own LUT emulation
(:func:`~quantemu.backends.nvdla.lut.sdp_lut` / :func:`~quantemu.backends.nvdla.lut.cdp_lut`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lut import LE_DEPTH, LO_DEPTH, cdp_lut, sdp_lut
from quantemu.backends.nvdla.registers import CdpRegisters, Precision, SdpRegisters
from quantemu.errors import InvalidInputError

__all__ = [
    "LutProgram",
    "LutUnit",
    "lrn_lut",
    "lut_error",
    "program_lut",
    "sigmoid_lut",
    "slope_fields",
    "table_exponent",
    "table_linear",
    "tanh_lut",
]

Func = Callable[[np.ndarray], np.ndarray]


class LutUnit(enum.Enum):
    """Which LUT the program is for: register names, widths and arithmetic differ (§2.4, §3.3)."""

    SDP = "sdp"
    CDP = "cdp"


@dataclass(frozen=True)
class LutProgram:
    """A programmed hybrid LUT: both tables, the raw LUT register fields and the scales.

    ``fields`` uses the unit's register names (SDP ``LUT_LE_START``; CDP ``LUT_LE_START_LOW`` /
    ``_HIGH``) and plugs into ``SdpRegisters`` / ``CdpRegisters``.
    """

    unit: LutUnit
    le: np.ndarray
    lo: np.ndarray
    fields: dict[str, int]
    in_scale: float
    out_scale: float

    def registers(self, **other):
        """The unit's register block with these LUT fields (plus ``other`` fields)."""
        block = SdpRegisters if self.unit is LutUnit.SDP else CdpRegisters
        return block(**self.fields, **other)


def _to_int16(v: np.ndarray) -> np.ndarray:
    r = np.floor(np.abs(v) + 0.5) * np.sign(v)  # round half away from zero
    return np.clip(np.nan_to_num(r, nan=0.0), -32768, 32767).astype(np.int16)


def table_linear(f: Func, start: int, sel: int, depth: int, *, in_scale: float, out_scale: float):
    """Entries ``round(f((start + i * 2^sel) / in_scale) * out_scale)``, i = 0..depth-1."""
    x = (start + np.arange(depth, dtype=np.float64) * 2.0**sel) / in_scale
    return _to_int16(f(x) * out_scale)


def table_exponent(f: Func, start: int, offset: int, *, in_scale: float, out_scale: float):
    """LE entries at ``start + 2^(offset + i)``, i = 0..64."""
    x = (start + 2.0 ** (offset + np.arange(LE_DEPTH, dtype=np.float64))) / in_scale
    return _to_int16(f(x) * out_scale)


def slope_fields(slope: float) -> tuple[int, int]:
    """Raw ``(SLOPE_SCALE, SLOPE_SHIFT)`` with ``scale * 2^-shift ~= slope`` (signed 5-bit shift).

    The shift puts ``|scale|`` just below 2^15 when the range allows.

    >>> slope_fields(0.25), slope_fields(-3.0), slope_fields(1e6)  # 1e6 = 31250 * 2^5
    ((8192, 15), (40960, 13), (31250, 27))
    """
    if slope == 0 or not math.isfinite(slope):
        return 0, 0
    shift = max(-16, min(15, 15 - math.frexp(abs(slope))[1]))  # |slope| = m 2^e, m in [.5, 1)
    scale = max(-32767, min(32767, round(slope * 2.0**shift)))
    return scale % (1 << 16), shift % (1 << 5)


def _linear_geometry(lo: float, hi: float, depth: int, in_scale: float) -> tuple[int, int]:
    if not hi > lo:
        raise InvalidInputError(f"program_lut: empty input range [{lo}, {hi}]")
    step = (hi - lo) * in_scale / (depth - 1)
    sel = max(0, math.ceil(math.log2(step))) if step > 0 else 0
    return math.floor(lo * in_scale), sel


def _secant(f: Func, x0: float, x1: float, in_scale: float, out_scale: float) -> float:
    """Slope of ``f`` between ``x0`` and ``x1`` in output integers per input integer."""
    y = f(np.array([x0, x1], dtype=np.float64)) * out_scale
    return float((y[1] - y[0]) / ((x1 - x0) * in_scale))


def _encode(unit: LutUnit, name: str, value: int, fields: dict) -> None:
    """A START/END value as raw fields: SDP int32; CDP 38 bits split into _LOW and _HIGH."""
    if unit is LutUnit.SDP:
        fields[name] = value % (1 << 32)
        return
    raw = value % (1 << 38)
    fields[name + "_LOW"], fields[name + "_HIGH"] = raw & 0xFFFFFFFF, raw >> 32


def program_lut(
    f: Func,
    *,
    in_scale: float,
    out_scale: float,
    lo_range: tuple[float, float],
    le_range: tuple[float, float] | None = None,
    le_exponent: tuple[float, int] | None = None,
    unit: LutUnit = LutUnit.SDP,
) -> LutProgram:
    """Program both tables for ``f``: LO linear over ``lo_range``; LE linear over ``le_range``
    or exponential from ``le_exponent = (start, index_offset)``. Hits in both take LO (the finer
    table); flows take LE (the wider one)."""
    width = 32 if unit is LutUnit.SDP else 38
    fields: dict[str, int] = {"LUT_HYBRID_PRIORITY": 1, "LUT_UFLOW_PRIORITY": 0}
    fields["LUT_OFLOW_PRIORITY"] = 0
    tables = {}
    specs = [("LO", lo_range, None), ("LE", le_range, le_exponent)]
    for name, rng, expo in specs:
        if expo is not None:
            start_real, off = expo
            start = math.floor(start_real * in_scale)
            tables[name] = table_exponent(f, start, off, in_scale=in_scale, out_scale=out_scale)
            first, end = start + 2**off, start + 2 ** (off + LE_DEPTH - 1)
            step_lo, step_hi = 2**off, 2 ** (off + LE_DEPTH - 1)
            fields["LUT_LE_FUNCTION"], fields["LUT_LE_INDEX_OFFSET"] = 0, off % 256
        else:
            if rng is None:
                raise InvalidInputError("program_lut: give le_range or le_exponent for LE")
            depth = LO_DEPTH if name == "LO" else LE_DEPTH
            start, sel = _linear_geometry(rng[0], rng[1], depth, in_scale)
            tables[name] = table_linear(
                f, start, sel, depth, in_scale=in_scale, out_scale=out_scale
            )
            first, end, step_lo = start, start + (depth - 1) * 2**sel, 2**sel
            step_hi = step_lo
            fields[f"LUT_{name}_INDEX_SELECT"] = sel % 256
            if name == "LE":
                fields["LUT_LE_FUNCTION"] = 1
        lim = (1 << (width - 1)) - 1
        _encode(unit, f"LUT_{name}_START", max(-lim - 1, min(lim, start)), fields)
        _encode(unit, f"LUT_{name}_END", max(-lim - 1, min(lim, end)), fields)
        under = _secant(f, (first - step_lo) / in_scale, first / in_scale, in_scale, out_scale)
        over = _secant(f, end / in_scale, (end + step_hi) / in_scale, in_scale, out_scale)
        for kind, s in (("UFLOW", under), ("OFLOW", over)):
            scale, shift = slope_fields(s)
            fields[f"LUT_{name}_SLOPE_{kind}_SCALE"] = scale
            fields[f"LUT_{name}_SLOPE_{kind}_SHIFT"] = shift
    return LutProgram(unit, tables["LE"], tables["LO"], fields, in_scale, out_scale)


def lut_error(program: LutProgram, f: Func, x: np.ndarray) -> tuple[float, float]:
    """Max ``|LUT(x) - f(x) * out_scale|`` over the integer inputs ``x``, via the emulation.

    Returns ``(max_error_lsb, max_error_real)``: in output integers and in ``f``'s units.
    """
    xi = np.asarray(x, dtype=np.int64)
    if program.unit is LutUnit.SDP:
        cfg = program.registers().lut()
        y = sdp_lut(xi, program.le.astype(np.int64), program.lo.astype(np.int64), cfg).y
        y = np.clip(y, -32768, 32767)  # the SDP LUT output is int32; compare in table range
    else:
        cfg = program.registers().lut()
        y = cdp_lut(xi, program.le.astype(np.int64), program.lo.astype(np.int64), cfg).y
    ref = np.clip(f(xi / program.in_scale) * program.out_scale, -32768, 32767)
    err = float(np.max(np.abs(y - ref))) if xi.size else 0.0
    return err, err / program.out_scale


def _dense(lo: float, hi: float, in_scale: float, n: int = 20001) -> np.ndarray:
    return np.unique(np.linspace(lo * in_scale, hi * in_scale, n).round().astype(np.int64))


def sigmoid_lut(in_scale: float, out_scale: float = 2**15 - 1, span: float = 8.0):
    """Sigmoid for the SDP: LO linear over ``[-span, span]``, LE linear over twice that.

    Returns ``(program, max_error_lsb)`` with the error measured over ``[-3 span, 3 span]``.
    """

    def f(x):
        return 1.0 / (1.0 + np.exp(-x))

    p = program_lut(f, in_scale=in_scale, out_scale=out_scale, lo_range=(-span, span),
                    le_range=(-2 * span, 2 * span))  # fmt: skip
    return p, lut_error(p, f, _dense(-3 * span, 3 * span, in_scale))[0]


def tanh_lut(in_scale: float, out_scale: float = 2**15 - 1, span: float = 4.0):
    """Tanh for the SDP, as :func:`sigmoid_lut`; returns ``(program, max_error_lsb)``."""
    p = program_lut(np.tanh, in_scale=in_scale, out_scale=out_scale, lo_range=(-span, span),
                    le_range=(-2 * span, 2 * span))  # fmt: skip
    return p, lut_error(p, np.tanh, _dense(-3 * span, 3 * span, in_scale))[0]


def lrn_lut(
    *, m: int, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0,
    out_scale: float = 2**14, precision: Precision = Precision.INT8,
):  # fmt: skip
    """LRN factor ``(k + alpha/size * ss)^-beta`` for the CDP (square sums of ``x * 2^m``).

    The LUT input is ``ss_int = ss * 2^(2m)``. LE exponential from 0 with offset 0 covers the
    whole 38-bit range; LO linear covers ``[0, 2^(2m) * 2^10]`` finely. Returns
    ``(program, max_error_lsb)`` over log-spaced inputs up to ``2^36``.
    """

    def f(ss):
        return (k + alpha / size * np.maximum(ss, 0.0)) ** (-beta)

    in_scale = 2.0 ** (2 * m)
    p = program_lut(f, in_scale=in_scale, out_scale=out_scale, lo_range=(0.0, 2.0**10),
                    le_exponent=(0.0, 0), unit=LutUnit.CDP)  # fmt: skip
    x = np.unique(np.round(np.geomspace(1, 2.0**36, 20001)).astype(np.int64))
    del precision  # non-negative selects encode the same way in INT8 and INT16
    return p, lut_error(p, f, np.concatenate([np.arange(0, 4096), x]))[0]
