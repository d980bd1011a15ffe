"""The output stage every int8 TFLite kernel ends with: a requantizing multiply, the output
offset, and the clamp to the fused activation's range, with counters for what the clamp did."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.params import MultiplierRounding
from quantemu.intmath import (
    multiply_by_quantized_multiplier_double_rounding,
    multiply_shift_right_round_half_up,
)

__all__ = ["Stage", "clamp_count", "clamp_counters", "requantize_clamp", "stage"]

INT8_MIN, INT8_MAX = -128, 127


def clamp_count(
    v: np.ndarray,
    act_min: int,
    act_max: int,
    *,
    floor: bool | None = None,
    ceiling: bool | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """``clamp(v, act_min, act_max)`` as int8, and how often each kind of clamp struck.

    Formula: ``min(max(v, act_min), act_max)``. Counters: a value clamped at a bound the fused
    activation set (``act_min > -128`` or ``act_max < 127``) is ``activation_clamped`` (the
    activation would clamp it anyway: nothing is lost); a value clamped at an int8 rail the
    activation left alone is ``output_saturated``. ``floor`` / ``ceiling`` say whether a fused
    activation set ``act_min`` / ``act_max`` when that cannot be read off the bounds (a ReLU
    whose zero is the -128 rail); by default a bound inside int8 is the activation's.

    Mirrors: the last two lines of every TFLite int8 reference kernel
    (``std::min(act_max, std::max(act_min, raw))``).

    >>> y, c = clamp_count(np.array([-300, -5, 0, 200]), -10, 127)
    >>> y.tolist(), c
    ([-10, -5, 0, 127], {'output_saturated': 1, 'activation_clamped': 1})
    """
    low, high = v < act_min, v > act_max
    n_low, n_high = int(np.count_nonzero(low)), int(np.count_nonzero(high))
    counters = clamp_counters(n_low, n_high, act_min, act_max, floor=floor, ceiling=ceiling)
    return np.clip(v, act_min, act_max).astype(np.int8), counters


def clamp_counters(
    n_low: int, n_high: int, act_min: int, act_max: int, *, floor=None, ceiling=None
) -> dict[str, int]:
    """:func:`clamp_count`'s counters from how many values fell below ``act_min`` and above
    ``act_max``."""
    floor = act_min > INT8_MIN if floor is None else floor
    ceiling = act_max < INT8_MAX if ceiling is None else ceiling
    by_act = (n_low if floor else 0) + (n_high if ceiling else 0)
    return {"output_saturated": n_low + n_high - by_act, "activation_clamped": by_act}


def requantize_clamp(
    acc,
    multiplier,
    shift,
    output_offset: int,
    *,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    rounding: MultiplierRounding = MultiplierRounding.DOUBLE,
    floor: bool | None = None,
    ceiling: bool | None = None,
    bias=None,
    bound: int | None = None,
    precomputed: Stage | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """``clamp(MBQM(acc + bias, m, s) + output_offset)``: see :func:`clamp_count`.
    ``multiplier`` / ``shift`` / ``bias`` broadcast against ``acc`` (per channel).
    ``rounding``: DOUBLE is
    :func:`~quantemu.intmath.multiply_by_quantized_multiplier_double_rounding`;
    SINGLE_HALF_UP is ``multiply_shift_right_round_half_up(acc, m, 31 - s)``, exact.
    ``bound``: a proved bound on ``|acc|`` (saves a scan); ``precomputed``: :func:`stage` of
    these parameters (saves its work on every call).

    The work is :func:`_fused` where its proofs hold (the same integers in fewer, narrower
    passes); the step-by-step form below is the specification and raises the errors."""
    rounding = MultiplierRounding(rounding)
    if precomputed is None:
        precomputed = stage(multiplier, shift, rounding, bias)
    y = _fused(acc, precomputed, bound)
    if y is not None:
        return _clamp_narrow(
            y, output_offset, act_min=act_min, act_max=act_max, floor=floor, ceiling=ceiling
        )
    if bias is not None:
        acc = np.asarray(acc, np.int64) + bias
    if rounding is MultiplierRounding.DOUBLE:
        raw = multiply_by_quantized_multiplier_double_rounding(acc, multiplier, shift)
    else:
        raw = multiply_shift_right_round_half_up(acc, multiplier, 31 - np.asarray(shift))
    out = np.asarray(raw, dtype=np.int64) + output_offset
    return clamp_count(out, act_min, act_max, floor=floor, ceiling=ceiling)


def merge(*counters: dict[str, int]) -> dict[str, int]:
    """Counters summed key by key."""
    out: dict[str, int] = {}
    for c in counters:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


# --- the fused stage ----------------------------------------------------------------------------

_ACC_DTYPES = tuple(
    np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16)
)


def _operands(multiplier, shift, bias):
    """``(m, s, b)`` as broadcast int64 arrays, or None outside what :func:`_fused` proves."""
    m, s = np.asarray(multiplier), np.asarray(shift)
    b = np.zeros((), np.int64) if bias is None else np.asarray(bias)
    if m.dtype.kind not in "iu" or s.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        return None
    m, s, b = np.broadcast_arrays(m.astype(np.int64), s.astype(np.int64), b.astype(np.int64))
    if m.min() < 0 or m.max() > 2**31 - 1 or s.min() < -31 or s.max() > 31:
        return None  # m < 0 (a saturating -2**31 among them) is left to the general path
    if np.abs(b).max() > 2**31:
        return None
    return m, s, b


@dataclass(frozen=True, eq=False)
class Stage:
    """What :func:`_fused` needs that depends on the parameters alone (built once per layer by
    :func:`stage`): per-channel arrays, or scalars where every channel agrees."""

    double: bool
    ndim: int
    big_m: np.ndarray  # m * 2**l (DOUBLE) or m
    add: np.ndarray  # b * big_m + 2**(sh - 1)
    sh: np.ndarray  # the int64 -> int32 shift
    r_any: bool
    r_mask: np.ndarray | None  # -1 where r > 0, 0 where r = 0 (None: r > 0 everywhere)
    r_half: np.ndarray  # 2**(r - 1) where r > 0
    r: np.ndarray
    b_max: int
    left: int
    m_max: int
    sh_min: int


def stage(multiplier, shift, rounding=MultiplierRounding.DOUBLE, bias=None) -> Stage | None:
    """The fused output stage's constants, or None where its proofs do not cover the
    parameters (then :func:`requantize_clamp` goes step by step)."""
    ops = _operands(multiplier, shift, bias)
    if ops is None:
        return None
    m, s, b = ops
    double = MultiplierRounding(rounding) is MultiplierRounding.DOUBLE
    big_m = m << np.maximum(s, 0) if double else m
    sh = np.full(s.shape, 31) if double else 31 - s
    half = np.where(sh > 0, np.left_shift(1, np.maximum(sh - 1, 0)), 0)
    r = np.maximum(-s, 0) if double else np.zeros_like(s)
    if int(np.abs(b).max()) * int(big_m.max()) >= 1 << 62:
        return None
    return Stage(
        double=double,
        ndim=m.ndim,
        big_m=big_m,
        add=b * big_m + half,
        sh=_uniform(sh),
        r_any=bool(r.any()),
        r_mask=None if r.all() else np.where(r > 0, -1, 0).astype(np.int32),
        r_half=_uniform(np.where(r > 0, np.left_shift(1, np.maximum(r - 1, 0)), 0)).astype(
            np.int32
        ),
        r=_uniform(r).astype(np.int32),
        b_max=int(np.abs(b).max()),
        left=int(s.max(initial=0)) if double else 0,
        m_max=int(big_m.max()),
        sh_min=int(sh.min()),
    )


def _fused(acc, st: Stage | None, bound):
    """The integers of the step-by-step stage as int32 ``y`` (``+ output_offset`` and the clamp
    still to do), or None where a proof below fails.

    DOUBLE: with ``l = max(s, 0)``, ``r = max(-s, 0)``, ``P = (acc + b) * m * 2**l``, the
    doubling high multiply is ``h = floor((P + 2**30) / 2**31)`` (no saturation: ``m >= 0``):
    one int64 multiply, one add of the per-channel ``b * m * 2**l + 2**30`` and one shift into
    int32. The rounding divide ``floor((h + 2**(r-1) + (h >> 31)) / 2**r)`` (``h >> 31`` is
    ``-[h < 0]``) then runs on int32. SINGLE_HALF_UP: ``(P + 2**(30-s)) >> (31-s)`` with
    ``P = (acc + b) * m``. Bounds: ``|acc| <= bound`` (scanned when not given or too loose).
    """
    if st is None or not isinstance(acc, np.ndarray) or acc.dtype not in _ACC_DTYPES:
        return None
    if acc.size == 0 or st.ndim > acc.ndim:
        return None
    if bound is None or (bound + st.b_max) << st.left > 2**31 - 1:
        bound = max(-int(acc.min()), int(acc.max()))  # the scan the proved bound did not save
    if st.double and (bound + st.b_max) << st.left > 2**31 - 1:
        return None  # outside int32 (TFLite's undefined behaviour): the general path raises
    top = (bound + st.b_max) * st.m_max  # >= |P|
    if top + (1 << 62) >= 2**63 or (top >> st.sh_min) + (1 << 30) + 2 > 2**31 - 1:
        return None  # int64 headroom, and int32 room for the rounding divide's adds
    p = np.multiply(acc, st.big_m, dtype=np.int64)
    p += st.add
    y = np.empty_like(p, dtype=np.int32)
    np.right_shift(p, st.sh, out=y, casting="unsafe")
    if st.r_any:
        _rounding_divide(y, st)
    return y


def _uniform(v: np.ndarray) -> np.ndarray:
    """``v``, or its one value when all are equal (a scalar operand makes a faster loop)."""
    return v.reshape(-1)[:1].reshape(()) if (v == v.flat[0]).all() else v


def _rounding_divide(h, st: Stage) -> None:
    """gemmlowp's ``RoundingDivideByPOT(h, r)`` in place on int32 ``h``, per channel ``r``."""
    neg = h >> 31  # -1 where h < 0
    if st.r_mask is not None:
        neg &= st.r_mask  # r = 0 divides by 1: no rounding
    h += neg
    h += st.r_half
    h >>= st.r


def _clamp_narrow(y, output_offset, *, act_min, act_max, floor, ceiling):
    """:func:`clamp_count` of ``y + output_offset`` on int32 ``y``: the bounds move instead of
    ``y`` (``clamp(y + o, lo, hi) = clamp(y, lo - o, hi - o) + o``), the comparisons count."""
    lo, hi = act_min - output_offset, act_max - output_offset
    n_low = int(np.count_nonzero(y < lo))
    n_high = int(np.count_nonzero(y > hi))
    counters = clamp_counters(n_low, n_high, act_min, act_max, floor=floor, ceiling=ceiling)
    if n_low or n_high:
        np.clip(y, lo, hi, out=y)
    out = np.empty_like(y, dtype=np.int8)
    np.add(y, output_offset, out=out, casting="unsafe")  # in [act_min, act_max]: int8
    return out, counters
