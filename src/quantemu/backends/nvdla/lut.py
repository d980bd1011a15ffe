"""The hybrid two-table LUT of the SDP and of the CDP, vectorised (``conformance/nvdla.md``).

Both units evaluate an LE table (65 entries, linear or exponent indexing) and an LO table (257
entries, linear) for every element, classify each as underflow / hit / overflow, pick one result
by the priority registers, and either interpolate between two entries or extrapolate from the
first/last entry with a slope. They differ in widths and in rounding (SDP §2.4, CDP §3.3):

* SDP: int32 input, 35-bit fractions, ``rhaz((y0*(2^35-f) + y1*f) / 2^35)`` saturated to int32,
  exponent-mode underflow reference ``START + 2^off`` only when ``off > 0``, the LE "signed
  fraction" quirk, counters LE_HIT / LO_HIT independent of the pick.
* CDP: 38-bit input, 16-bit fractions, ``y0 + rhaz((y1-y0)*f / 2^16)`` saturated to int16,
  underflow reference ``START + 2^off`` when ``off >= 0``, counters by selection case.

Everything is array code: per element there are only comparisons, ``np.where`` and gathers.
The register values (selects, offsets) are scalars, so shift amounts are Python ints; where a
register allows a shift the arithmetic does not need (a select of 100 on a 33-bit difference),
the shift is capped at a value with the same result, and the comment says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.registers import LeFunction, LutConfig, Slope, Table
from quantemu.errors import InvalidInputError
from quantemu.intmath import NegativeShift, saturate, shift_right_round_half_away

UFLOW, HIT, OFLOW = 0, 1, 2  # per-element classification codes (int8 arrays)
LE_DEPTH, LO_DEPTH = 65, 257
SDP_FRAC_BITS = 35
SDP_COUNTERS = ("LUT_UFLOW", "LUT_OFLOW", "LUT_HYBRID", "LUT_LE_HIT", "LUT_LO_HIT")


@dataclass(frozen=True)
class LutOutput:
    """A LUT evaluation: ``y`` (int64), the per-element kinds and the picked table.

    ``le_kind`` / ``lo_kind`` / ``kind`` are int8 arrays of :data:`UFLOW`, :data:`HIT`,
    :data:`OFLOW` (``kind`` is the picked one); ``pick_lo`` is true where LO was picked.
    """

    y: np.ndarray
    le_kind: np.ndarray
    lo_kind: np.ndarray
    kind: np.ndarray
    pick_lo: np.ndarray


def check_tables(le, lo, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate LE ``[65]`` and LO ``[257]`` int16 tables; return them as int64."""
    out = []
    for name, t, depth in (("LUT_LE", le, LE_DEPTH), ("LUT_LO", lo, LO_DEPTH)):
        if t is None:
            raise InvalidInputError(
                f"{where}: the LUT is active but {name} is missing; pass a table of {depth} "
                "int16 entries (or bypass the LUT)"
            )
        a = np.asarray(t)
        if a.dtype.kind not in "iu" or a.shape != (depth,):
            raise InvalidInputError(
                f"{where}: {name} must be an integer array of shape ({depth},), got dtype "
                f"{a.dtype} shape {a.shape}"
            )
        a = a.astype(np.int64)
        if a.size and (a.min() < -(1 << 15) or a.max() >= 1 << 15):
            raise InvalidInputError(
                f"{where}: {name} entries are int16; got values in [{a.min()}, {a.max()}]"
            )
        out.append(a)
    return out[0], out[1]


# --- classification and selection -------------------------------------------------------------


def classify(under: np.ndarray, over: np.ndarray) -> np.ndarray:
    """HIT, UFLOW or OFLOW per element from the two flags (underflow wins)."""
    return np.where(under, np.int8(UFLOW), np.where(over, np.int8(OFLOW), np.int8(HIT)))


def select_lo(le_kind: np.ndarray, lo_kind: np.ndarray, cfg: LutConfig) -> np.ndarray:
    """Where the LO result is picked (§2.4 ``lut``; the CDP uses the same rule, §3.3).

    Both underflow: UFLOW_PRIORITY; both overflow: OFLOW_PRIORITY; exactly one hit: that table;
    both hit, or one under- and one overflow: HYBRID_PRIORITY.
    """
    le_hit, lo_hit = le_kind == HIT, lo_kind == HIT
    return np.select(
        [
            le_hit != lo_hit,
            (le_kind == UFLOW) & (lo_kind == UFLOW),
            (le_kind == OFLOW) & (lo_kind == OFLOW),
        ],
        [lo_hit, cfg.uflow_priority is Table.LO, cfg.oflow_priority is Table.LO],
        default=cfg.hybrid_priority is Table.LO,
    )


def sdp_counts(kind: np.ndarray, le_kind: np.ndarray, lo_kind: np.ndarray) -> dict[str, int]:
    """The SDP's LUT counters (§2.4, FP16 as well): the picked table's under- and overflows and
    hits (``LUT_HYBRID``), and each table's own hits whichever was picked."""
    cases = (kind == UFLOW, kind == OFLOW, kind == HIT, le_kind == HIT, lo_kind == HIT)
    return {n: int(np.count_nonzero(c)) for n, c in zip(SDP_COUNTERS, cases, strict=True)}


def cdp_counts(le_kind: np.ndarray, lo_kind: np.ndarray) -> dict[str, int]:
    """The CDP's LUT counters count selection cases (§3.3), unlike the SDP's (FP16 as well)."""
    one_hit = (le_kind == HIT) != (lo_kind == HIT)
    both_u = (le_kind == UFLOW) & (lo_kind == UFLOW)
    both_o = (le_kind == OFLOW) & (lo_kind == OFLOW)
    return {
        "PERF_LUT_UFLOW": int(np.count_nonzero(both_u)),
        "PERF_LUT_OFLOW": int(np.count_nonzero(both_o)),
        "PERF_LUT_LE_HIT": int(np.count_nonzero(one_hit & (le_kind == HIT))),
        "PERF_LUT_LO_HIT": int(np.count_nonzero(one_hit & (lo_kind == HIT))),
        "PERF_LUT_HYBRID": int(np.count_nonzero(~one_hit & ~both_u & ~both_o)),
    }


def _flow(y0: int, d: np.ndarray, slope: Slope, bits: int) -> np.ndarray:
    """Extrapolation ``sat_bits(y0 + RS(d * scale, shift))``, ``RS`` = rhaz or a left shift.

    Exact in int64: once ``|d| >= 2^(bits+15)`` (and ``scale != 0``) the shifted product has
    magnitude ``>= 2^bits`` even after the largest right shift (15), so adding ``|y0| < 2^15``
    saturates the same way; clamping ``d`` there changes nothing and bounds
    ``|d * scale| <= 2^(bits+30) <= 2^62``. Left shifts (up to 16) saturate at ``bits + 16``
    bits, again beyond anything ``y0`` can bring back into range.
    """
    lim = 1 << (bits + 15)
    v = np.clip(d, -lim, lim) * slope.scale
    r = shift_right_round_half_away(
        v, slope.shift, negative=NegativeShift.SATURATING_LEFT, bits=bits + 16
    )
    return saturate(r + y0, bits)


def _index(u: np.ndarray, sel: int, cap: int) -> np.ndarray:
    """``u >> sel`` or ``u << -sel`` for ``u >= 1``, with shifts capped where nothing changes.

    Right: ``u < 2^cap``, so any shift ``>= cap`` gives 0, as ``cap`` does. Left: any shift
    ``>= 9`` gives at least 512, past the last index of either table, as 9 does.
    """
    return u >> min(sel, cap) if sel >= 0 else u << min(-sel, 9)


def _by_kind(kind: np.ndarray, hit, uflow, oflow) -> np.ndarray:
    return np.where(kind == HIT, hit, np.where(kind == UFLOW, uflow, oflow))


def _combine(le_kind, le_y, lo_kind, lo_y, cfg: LutConfig) -> LutOutput:
    pick_lo = select_lo(le_kind, lo_kind, cfg)
    y = np.where(pick_lo, lo_y, le_y)
    return LutOutput(y, le_kind, lo_kind, np.where(pick_lo, lo_kind, le_kind), pick_lo)


# --- SDP -----------------------------------------------------------------------------------------


def _sdp_linear(x, start: int, sel: int, depth: int, le_quirk: bool):
    """``index_linear`` of §2.4: ``(kind, addr, frac)`` with 35-bit fractions."""
    u = x - start  # |x|, |start| <= 2^31, so |u| <= 2^32
    under = u <= 0
    up = np.where(under, 1, u)  # 1 .. 2^32 - 1 where it matters
    q = _index(up, sel, 40)
    kind = classify(under, q >= depth - 1)
    if sel <= 0:
        frac = np.zeros(x.shape, dtype=np.int64)  # u mod 1 = 0, or d << (35 - sel) mod 2^35 = 0
    else:
        d = up & ((1 << min(sel, 40)) - 1)  # sel >= 33 keeps all of up, as 40 does
        if le_quirk:
            # d is held in a signed 32-bit variable: d >= 2^31 reads as d - 2^32, and that
            # negative number taken mod 2^35 is d - 2^32 + 2^35 (only possible for sel >= 32).
            d = np.where(d >= 1 << 31, d + ((1 << 35) - (1 << 32)), d)
        if sel >= SDP_FRAC_BITS:
            frac = d >> min(sel - SDP_FRAC_BITS, 40)  # d < 2^35
        else:
            frac = (d << (SDP_FRAC_BITS - sel)) & ((1 << SDP_FRAC_BITS) - 1)  # d << 3 < 2^38
    return kind, np.where(kind == HIT, q, 0), frac


def _sdp_exponent(x, start: int, off: int):
    """``index_exponent`` of §2.4: the LE address is ``floor(log2(x - START)) - off``."""
    s = x - start
    under = s <= 0
    sp = np.where(under, 1, s)
    # frexp is exact here: sp < 2^33 is an exactly representable float64 integer.
    e = np.frexp(sp.astype(np.float64))[1].astype(np.int64) - 1
    under |= e < off
    kind = classify(under, e - off >= 64)
    addr = np.where(kind == HIT, e - off, 0)
    frac = (sp - (np.int64(1) << e)) << (SDP_FRAC_BITS - e)  # e <= 32: < 2^35
    return kind, addr, frac


def _sdp_hit(table: np.ndarray, addr: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """``SHR(T[q] * (2^35 - f) + T[q+1] * f, 35, 32)``; |sum| <= 2^15 * 2^35 = 2^50."""
    q1 = np.minimum(addr + 1, table.size - 1)  # only non-hit lanes can ask for T[depth]
    acc = table[addr] * ((1 << SDP_FRAC_BITS) - frac) + table[q1] * frac
    return saturate(shift_right_round_half_away(acc, SDP_FRAC_BITS), 32)


def sdp_lut(x: np.ndarray, le: np.ndarray, lo: np.ndarray, cfg: LutConfig) -> LutOutput:
    """The SDP LUT of §2.4 on an int64 array ``x`` of int32 values; tables as int64 arrays.

    Exponent-mode underflow uses ``START + 2^off`` as its reference only for ``off > 0``. Offsets
    32..127 are undefined behaviour in the cmod (a native 32-bit shift); here the page's formula
    is evaluated exactly on unbounded integers (the reference saturates anyway).
    """
    off = cfg.le_index_offset
    if cfg.le_function is LeFunction.EXPONENT:
        le_kind, le_addr, le_frac = _sdp_exponent(x, cfg.le_start, off)
        # 2^off beyond 2^50 moves x - ref past the clamp of _flow either way: cap it.
        le_bias = 1 << min(off, 50) if off > 0 else 0
    else:
        le_kind, le_addr, le_frac = _sdp_linear(
            x, cfg.le_start, cfg.le_index_select, LE_DEPTH, le_quirk=True
        )
        le_bias = 0
    lo_kind, lo_addr, lo_frac = _sdp_linear(
        x, cfg.lo_start, cfg.lo_index_select, LO_DEPTH, le_quirk=False
    )
    le_y = np.where(
        le_kind == HIT,
        _sdp_hit(le, le_addr, le_frac),
        np.where(
            le_kind == UFLOW,
            _flow(int(le[0]), x - cfg.le_start - le_bias, cfg.le_uflow, 32),
            _flow(int(le[-1]), x - cfg.le_end, cfg.le_oflow, 32),
        ),
    )
    lo_y = np.where(
        lo_kind == HIT,
        _sdp_hit(lo, lo_addr, lo_frac),
        np.where(
            lo_kind == UFLOW,
            _flow(int(lo[0]), x - cfg.lo_start, cfg.lo_uflow, 32),
            _flow(int(lo[-1]), x - cfg.lo_end, cfg.lo_oflow, 32),
        ),
    )
    return _combine(le_kind, le_y, lo_kind, lo_y, cfg)


# --- CDP -----------------------------------------------------------------------------------------


def _f16(f: np.ndarray, n) -> np.ndarray:
    """``F16(f, n)``: an ``n``-bit fraction rescaled to 16 bits (``f < 2^n``, shifts capped)."""
    n = np.asarray(n)
    down = f >> np.clip(n - 16, 0, 45)  # f < 2^45: a shift of 45 already gives 0
    up = f << np.clip(16 - n, 0, 16)  # n >= 0 here, so 16 - n <= 16
    return np.where(n > 16, down, up)


def _cdp_interp(table: np.ndarray, addr: np.ndarray, f16: np.ndarray) -> np.ndarray:
    """``sat16(y0 + rhaz((y1 - y0) * f16 / 2^16))``; |(y1 - y0) * f16| < 2^17 * 2^16."""
    y0 = table[addr]
    y1 = table[np.minimum(addr + 1, table.size - 1)]
    return saturate(y0 + shift_right_round_half_away((y1 - y0) * f16, 16), 16)


def _cdp_linear(ss, table: np.ndarray, ends: tuple[int, int], fb: int, slopes: tuple[Slope, Slope]):
    """``linear`` of §3.3: 38-bit reference points, 16-bit fractions."""
    start, end = ends
    t = ss - start  # |ss| < 2^37, |start| < 2^37: |t| < 2^38
    under = t <= 0
    tp = np.where(under, 1, t)
    idx = _index(tp, fb, 45)
    kind = classify(under, idx >= table.size - 1)
    addr = np.where(kind == HIT, idx, 0)
    # Negative selects have no fraction bits; tp < 2^39, so a mask of 45 bits keeps all of tp.
    f16 = _f16(tp & ((1 << min(fb, 45)) - 1), fb) if fb >= 0 else np.zeros_like(tp)
    uflow, oflow = slopes
    y = _by_kind(
        kind,
        _cdp_interp(table, addr, f16),
        _flow(int(table[0]), t, uflow, 16),
        _flow(int(table[-1]), ss - end, oflow, 16),
    )
    return kind, y


def _cdp_exponent(ss, cfg: LutConfig, table: np.ndarray):
    """``exponent`` of §3.3 (LE only); the underflow reference adds ``2^off`` when off >= 0."""
    off = cfg.le_index_offset
    t = ss - cfg.le_start
    under = t <= 0
    tp = np.where(under, 1, t)
    e = np.frexp(tp.astype(np.float64))[1].astype(np.int64) - 1  # exact: tp < 2^39
    under |= e < off
    kind = classify(under, e - off >= 64)
    addr = np.where(kind == HIT, e - off, 0)
    f16 = _f16(tp - (np.int64(1) << e), e)
    # Offsets above 40 are undefined behaviour in the cmod; 2^min(off, 50) is the exact
    # page formula after _flow's clamp (|t| < 2^39, so t - 2^50 is below -2^31 either way).
    bias = 1 << min(off, 50) if off >= 0 else 0
    y = _by_kind(
        kind,
        _cdp_interp(table, addr, f16),
        _flow(int(table[0]), t - bias, cfg.le_uflow, 16),
        _flow(int(table[-1]), ss - cfg.le_end, cfg.le_oflow, 16),
    )
    return kind, y


def cdp_lut(ss: np.ndarray, le: np.ndarray, lo: np.ndarray, cfg: LutConfig) -> LutOutput:
    """The CDP LUT of §3.3 on an int64 array of square sums (38-bit range)."""
    if cfg.le_function is LeFunction.EXPONENT:
        le_kind, le_y = _cdp_exponent(ss, cfg, le)
    else:
        le_kind, le_y = _cdp_linear(
            ss, le, (cfg.le_start, cfg.le_end), cfg.le_index_select, (cfg.le_uflow, cfg.le_oflow)
        )
    lo_kind, lo_y = _cdp_linear(
        ss, lo, (cfg.lo_start, cfg.lo_end), cfg.lo_index_select, (cfg.lo_uflow, cfg.lo_oflow)
    )
    return _combine(le_kind, le_y, lo_kind, lo_y, cfg)
