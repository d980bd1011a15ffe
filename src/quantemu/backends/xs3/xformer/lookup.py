"""``XC_lookup`` (int8): xcore-opt's 256-entry activation tables and lib_nn's ``lookup8``.

xcore-opt 1.4.2 turns every standalone int8 RELU, RELU6, TANH, LOGISTIC, HARD_SWISH,
LEAKY_RELU and int8 -> int8 QUANTIZE (and the ReLU/ReLU6 it splits out of a conv or an
ADD/SUB) into ``XC_lookup``. The table is computed once, in double precision
(``ApplyXCPatterns.cpp: getLookupTableI8``); at run time each int8 code indexes it by its
uint8 bit pattern (``nn_operator.c: lookup8_ref``). LEAKY_RELU and QUANTIZE are not in the
public source; their formulas here were fitted to, and match, the 1.4.2 host interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError

#: The activation functions xcore-opt tabulates, on the dequantized input (double).
KINDS = ("relu", "relu6", "clip", "tanh", "logistic", "hard_swish", "leaky_relu", "identity")

_INT32_MIN = -(1 << 31)


def c_round_half_away(v: float) -> float:
    """C ``round``: the nearest integer, ties away from zero (exact on every double).

    >>> [c_round_half_away(v) for v in (0.5, -0.5, 1.49999, 0.49999999999999994, -2.5)]
    [1.0, -1.0, 1.0, 0.0, -3.0]
    """
    t = float(math.trunc(v))
    frac = v - t  # exact: v and t share the exponent range
    if frac >= 0.5:
        return t + 1.0
    if frac <= -0.5:
        return t - 1.0
    return t


def _function(kind: str, alpha: float, bounds: tuple[float, float]) -> Callable[[float], float]:
    lo, hi = bounds
    functions: dict[str, Callable[[float], float]] = {
        "relu": lambda x: max(x, 0.0),
        "relu6": lambda x: min(max(x, 0.0), 6.0),
        "clip": lambda x: min(max(x, lo), hi),
        "tanh": math.tanh,
        "logistic": lambda x: 1.0 / (1.0 + math.exp(-x)),
        "hard_swish": lambda x: x * min(max(x + 3, 0.0), 6.0) / 6,
        "leaky_relu": lambda x: x if x > 0 else alpha * x,
        "identity": lambda x: x,
    }
    try:
        return functions[kind]
    except KeyError:
        raise UnsupportedError(
            f"XC_lookup has no table for {kind!r}; supported: {', '.join(KINDS)}"
        ) from None


def lookup_table_int8(
    kind: str,
    s_in,
    zp_in: int,
    s_out,
    zp_out: int,
    *,
    alpha: float = 0.0,
    bounds: tuple[float, float] = (0.0, 6.0),
) -> np.ndarray:
    """xcore-opt's ``XC_lookup`` table: 256 int8 entries, entry ``i`` for the input whose
    uint8 bit pattern is ``i`` (``q = i`` for ``i < 128``, ``i - 256`` otherwise).

    Formula on Z: ``x = (q - zp_in) * s_in`` (double; the scales are the TFLite float32
    values widened), ``t = int32(round(f(x) / s_out)) + zp_out``, entry ``= clamp(t, -128,
    127)``. ``alpha``: LEAKY_RELU's slope (float32 widened); ``bounds``: a ``clip``'s range.

    Policy: C ``round`` (ties away from zero) in double; a quotient beyond int32 converts to
    ``INT32_MIN`` and the ``+ zp_out`` wraps, as x86-64's ``cvttsd2si`` and int32 add do on
    the host that ran xcore-opt (unreachable for realistic scales).

    Mirrors: ``ApplyXCPatterns.cpp: getLookupTableI8`` (libm ``tanh``/``exp``, called here
    through Python's ``math``, which is the same C library).

    >>> t = lookup_table_int8("relu", 0.5, -1, 0.25, -128)
    >>> [int(t[i]) for i in (0, 1, 127, 255, 128)]  # q = 0, 1, 127, -1, -128
    [-126, -124, 127, -128, -128]
    """
    si, so = float(np.float32(s_in)), float(np.float32(s_out))
    if not (math.isfinite(si) and math.isfinite(so)) or so == 0.0:
        raise InvalidInputError(f"XC_lookup: scales must be finite, s_out nonzero: {s_in}, {s_out}")
    f = _function(kind, float(np.float32(alpha)), (float(bounds[0]), float(bounds[1])))
    table = np.empty(256, np.int8)
    for i in range(256):  # 256 table entries at lowering time, not a run-time loop
        q = i if i < 128 else i - 256
        r = c_round_half_away(f((q - int(zp_in)) * si) / so)
        t = int(r) if abs(r) < 2**31 else _INT32_MIN
        t = (t + int(zp_out) + 2**31) % 2**32 - 2**31
        table[i] = max(-128, min(127, t))
    return table


def lookup8(x, table) -> np.ndarray:
    """``lookup8``: ``y = table[uint8(x)]`` for int8 codes ``x`` (any shape).

    Formula on Z: ``y = table[x mod 256]``. Policy: no arithmetic; the table is in uint8
    bit-pattern order (as ``XC_lookup`` stores it). Mirrors: ``nn_operator.c: lookup8_ref``.

    >>> t = np.arange(256).astype(np.int8)  # table[i] = int8(i): the identity on codes
    >>> lookup8(np.array([-128, -1, 0, 127], np.int8), t).tolist()
    [-128, -1, 0, 127]
    """
    codes = np.asarray(x)
    tab = np.asarray(table)
    if tab.shape != (256,) or tab.dtype != np.int8:
        raise InvalidInputError(
            f"lookup8: the table must be 256 int8 values, got {tab.dtype} {tab.shape}"
        )
    if codes.dtype == np.int8:
        return np.take(tab, codes.view(np.uint8))  # int8 codes need no scan
    if codes.dtype.kind not in "iu" or (codes.size and (codes.min() < -128 or codes.max() > 127)):
        raise InvalidInputError(f"lookup8: x must hold int8 codes, got {codes.dtype}")
    return tab[codes.astype(np.int8).view(np.uint8)]


__all__ = ["KINDS", "c_round_half_away", "lookup8", "lookup_table_int8"]
