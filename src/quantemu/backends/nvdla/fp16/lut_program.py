"""The FP16 LUTs NVIDIA's compiler programs (nvdla/sw ``LutManager.cpp``, firmware ``update_lut``).

Unlike the integer LUTs (:mod:`quantemu.backends.nvdla.lut_program`, quantemu's own rule), the
open compiler fills these tables itself; quantemu reproduces them by their definition, checked
entry for entry against the compiler's source:

- **Sigmoid** (SDP): LO linear, 257 entries ``fp16(sigmoid(-16 + i/8))``, ``LO_START = -16.0``
  (an fp32 word), ``LO_INDEX_SELECT = -3``; the LE table is disabled (all +0, ``LE_INDEX_SELECT
  = -128``, linear, START = END = 0); every priority LO; every slope 0, so beyond the table the
  output is its first or last entry.
- **Tanh** (SDP): the same with ``fp16(tanh(-4 + i/32))``, ``LO_START = -4.0``, ``LO_INDEX_SELECT
  = -5``.
- **LRN** (CDP): LE exponential from ``2^0``: 65 entries ``fp16(float32(1 / (k + alpha/size *
  2^i)^beta))`` (``alpha/size`` in float32, the rest in double, then through float32),
  ``LE_START = 0``, ``LE_INDEX_OFFSET = 0``; the LO table is disabled (all +0,
  ``LO_INDEX_SELECT = -128``, START = END = 1); every priority LE; every slope 0, so a square
  sum below 1 reads entry 0. Interpolating linearly across each octave of the square sum, the
  table is a few percent off ``f`` where ``alpha/size * ss`` is not small.

``LO_END`` is 0 in the sigmoid and tanh programs ("unused", says the compiler): a linear table's
overflow is decided by its index, not by END, so the tables work as intended.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.registers import LeFunction, Table

__all__ = ["lrn_fp16_lut", "sdp_fp16_lut"]

DISABLED_SELECT = 0x80  # an index select of -128 (8-bit field): the compiler's "disabled"
_SDP_TABLES = {  # op -> (function, LO_START, LO_INDEX_SELECT)
    "Sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), -16.0, -3),
    "Tanh": (np.tanh, -4.0, -5),
}


def _fp32_word(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def _fp16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16)


def sdp_fp16_lut(op: str) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """``(SDP LUT register fields, LE table, LO table)`` (tables as float16) for ``op``
    (``Sigmoid`` or ``Tanh``)."""
    f, start, select = _SDP_TABLES[op]
    step = 2.0**select
    lo = _fp16(f(start + np.arange(257, dtype=np.float64) * step))
    fields = {
        "LUT_LE_FUNCTION": int(LeFunction.LINEAR),
        "LUT_LE_INDEX_SELECT": DISABLED_SELECT,
        "LUT_LO_START": _fp32_word(start),
        "LUT_LO_INDEX_SELECT": select & 0xFF,
        "LUT_HYBRID_PRIORITY": int(Table.LO),
        "LUT_UFLOW_PRIORITY": int(Table.LO),
        "LUT_OFLOW_PRIORITY": int(Table.LO),
    }
    return fields, np.zeros(65, np.float16), lo


def lrn_fp16_lut(*, size: int, alpha: float, beta: float, k: float):
    """``(CDP LUT register fields, LE table, LO table)`` (tables as float16) of LRN."""
    ss = 2.0 ** np.arange(65, dtype=np.float64)
    # The compiler's types: alpha / localSize in float (NvF32 / NvU32), the rest in double.
    a_n = np.float64(np.float32(alpha) / np.float32(size))
    base = np.float64(np.float32(k)) + a_n * ss
    le = _fp16(np.float32(1.0 / base ** np.float64(np.float32(beta))))
    fields = {
        "LUT_LE_FUNCTION": int(LeFunction.EXPONENT),
        "LUT_LE_INDEX_OFFSET": 0,
        "LUT_LO_INDEX_SELECT": DISABLED_SELECT,
        "LUT_LO_START_LOW": 1,
        "LUT_LO_END_LOW": 1,
        "LUT_HYBRID_PRIORITY": int(Table.LE),
        "LUT_UFLOW_PRIORITY": int(Table.LE),
        "LUT_OFLOW_PRIORITY": int(Table.LE),
    }
    return fields, le, np.zeros(257, np.float16)
