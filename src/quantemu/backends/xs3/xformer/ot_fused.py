"""lib_nn's output transform, fused into a few in-place int32 passes planned at lowering.

The same function as :func:`~quantemu.backends.xs3.xformer.runtime.ot_group` and
:func:`~quantemu.backends.xs3.xformer.runtime.ot_channelwise` (which stay the specification;
tests compare the two with ``==``), computed differently:

- Per-channel magnitude bounds, from a proved bound on ``|acc|`` (weights only), decide once
  which saturations can strike. One that cannot is skipped: the clamp would be the identity.
- Every intermediate is proved to fit int32, so one int32 buffer is updated in place.
- Floor shifts compose: ``floor((floor((p + a) / 2**m) + b) / 2**n) = floor((p + a + b * 2**m)
  / 2**(m + n))`` for integers ``a``, ``b``. So VLMUL's rounding and an unsaturated VLADD are one
  add before one shift, and VLASHR right (its SAT16 cannot strike on a 16-bit lane) and
  VDEPTH8's rounding are one add before one shift.

:func:`plan_ot` returns None where a proof fails (an accumulator bound beyond int32, shifts of
30 bits or more); the caller then runs the reference functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.xformer.runtime import VlashrRounding

INT32_MAX = 2**31 - 1
SAT16 = 2**15 - 1
_MAX_SHIFT = 29  # int32 right shifts stay well inside the type's width


@dataclass(frozen=True, eq=False)
class FusedOt:
    """What :func:`run_fused` does: in-place int32 steps, then the clamp into int8.

    ``steps``: ``(op, operand)`` pairs; ``op`` is ``"add"``, ``"shr"``, ``"mul"``, ``"shl"``
    (a left shift wrapping in 32 bits, as the C's) or ``"sat16"``; operands are ints or
    read-only int32 arrays over the channel axis. ``zero``: every output is 0."""

    zero: bool
    first_add: np.ndarray | int  # added while narrowing the accumulators to int32
    steps: tuple[tuple[str, np.ndarray | int | None], ...]


def frozen_operand(a) -> np.ndarray | int:
    arr = np.ascontiguousarray(a, np.int32)
    if arr.size and np.all(arr == arr.flat[0]):
        return int(arr.flat[0])  # one value for every channel: a scalar operand is cheaper
    arr.setflags(write=False)
    return arr


def _left_bound(m: np.ndarray, k: int) -> np.ndarray:
    """Magnitude bound after ``SAT16(wrap32(t << k))``."""
    shifted = m.astype(object) * 2**k
    return np.where(shifted <= SAT16, shifted, SAT16).astype(np.int64)


def _vdepth8_left(v: int, k: int) -> int:
    """VLASHR left by ``k`` (no wrap) and SAT16, then VDEPTH8: the reference on one value."""
    return max(-128, min(127, (max(-SAT16, min(SAT16, v * 2**k)) + 128) >> 8))


def _left_tail(mul, bias, k: int) -> list:
    """Steps after VLSAT for a final VLASHR left by ``0 <= k <= 14``.

    VDEPTH8 ends in a clamp, and everything between VLMUL and it is nondecreasing, so a SAT16
    on the way is redundant wherever the rest already reaches the rail at the SAT16's bound:
    for VLASHR's and VLADD's always (``k <= 14`` puts ``+-32767`` beyond ``+-127 * 2**8``),
    for VLMUL's when ``bias`` leaves every channel there. Without them, the floor shifts fold:
    ``((v << k) + 128) >> 8 = (v + 2**(7 - k)) >> (8 - k)`` for ``k <= 7``, ``v << (k - 8)``
    beyond. Every intermediate stays under ``98304 * 2**14 < 2**31``."""
    bias = np.asarray(bias, np.int64)
    up = np.array([_vdepth8_left(SAT16 + int(b), k) == 127 for b in np.unique(bias)])
    down = np.array([_vdepth8_left(-SAT16 + int(b), k) == -128 for b in np.unique(bias)])
    half, shr = (1 << (7 - k), 8 - k) if k <= 7 else (0, 0)
    steps = [("mul", frozen_operand(mul))]
    if up.all() and down.all():  # VLMUL's rounding, VLADD and VDEPTH8's rounding: one add
        steps += [("add", frozen_operand(2**13 + (bias + half) * 2**14)), ("shr", 14 + shr)]
    else:
        steps += [
            ("add", 2**13),
            ("shr", 14),
            ("sat16", None),
            ("add", frozen_operand(bias + half)),
        ]
        steps += [("shr", shr)] if shr else []
    return steps + ([("shl", k - 8)] if k > 8 else [])


def _general_tail(m, mul, bias, fs: int, rounding) -> list:
    """Steps after VLSAT for any other ``final_shr``, each SAT16 kept unless bounds rule it out;
    VLMUL's rounding and an unsaturated VLADD share one add, as do VLASHR right and VDEPTH8's
    rounding."""
    mm = (m * np.abs(mul) + 2**13) >> 14  # |t * mul| <= 32767 * 32768 < 2**30
    sat_mul = bool(np.any(mm > SAT16))
    m2 = np.minimum(mm, SAT16) + np.abs(bias)
    steps = [("mul", frozen_operand(mul))]
    if sat_mul:
        steps += [("add", 2**13), ("shr", 14), ("sat16", None), ("add", frozen_operand(bias))]
    else:
        steps += [("add", frozen_operand(2**13 + bias * 2**14)), ("shr", 14)]
    if np.any(m2 > SAT16):
        steps.append(("sat16", None))
    if fs < 0:  # -31 <= fs < -14: a left shift that may wrap, SAT16, then VDEPTH8
        return [*steps, ("shl", -fs), ("sat16", None), ("add", 128), ("shr", 8)]
    half = 1 << (fs - 1) if fs > 0 and rounding is VlashrRounding.HOST else 0
    return [*steps, ("add", half + (128 << fs)), ("shr", fs + 8)]


def plan_ot(shift, mul, bias, *, initial_left: int, final_shr: int, acc_bound, rounding):
    """The fused plan, or None where the int32 proofs fail.

    ``shift``: the VLSAT shift per channel (``>= 0``); ``initial_left``: the group OT's VLASHR
    left shift after an unshifted VLSAT (``-initial_shr`` when that is negative, else 0);
    ``acc_bound``: a proved bound on ``|acc|`` per channel (or one for all)."""
    s = np.asarray(shift, np.int64)
    mul, bias = np.asarray(mul, np.int64), np.asarray(bias, np.int64)
    b = np.broadcast_to(np.asarray(acc_bound, np.int64), s.shape)
    if s.size == 0 or s.min() < 0 or s.max() > _MAX_SHIFT or not 0 <= initial_left < 32:
        return None
    if np.any(np.abs(mul) > 2**15) or np.any(np.abs(bias) > 2**15):
        return None  # int16 parameters keep every product and sum below 2**31
    r = np.where(s > 0, np.left_shift(1, np.maximum(s - 1, 0)), 0)
    if np.any(b + r > INT32_MAX):  # also rules out SAT32 (|acc| <= b <= 2**31 - 1)
        return None
    fs = int(final_shr)
    if fs >= 15 or fs <= -32:  # sign -> VDEPTH8 gives 0; a shift of 32+ leaves 0
        return FusedOt(zero=True, first_add=0, steps=())
    m = (b + r) >> s  # floor((-b + r) / 2**s) is no larger in magnitude
    steps = [("shr", frozen_operand(s))] if np.any(s) else []
    if np.any(m > SAT16):
        steps.append(("sat16", None))
    m = np.minimum(m, SAT16)
    if initial_left:
        steps += [("shl", int(initial_left)), ("sat16", None)]
        m = _left_bound(m, initial_left)
    if -14 <= fs <= 0:
        steps += _left_tail(mul, bias, -fs)
    else:
        steps += _general_tail(m, mul, bias, fs, rounding)
    return FusedOt(zero=False, first_add=frozen_operand(r), steps=tuple(steps))


def _shl_wrap(t: np.ndarray, k: int) -> None:
    """``t = wrap32(t << k)`` in place: the shift on the unsigned view wraps exactly."""
    u = t.view(np.uint32)
    np.left_shift(u, np.uint32(k), out=u)


def run_fused(
    plan: FusedOt, acc: np.ndarray, out: np.ndarray | None = None, *, consume: bool = False
) -> np.ndarray:
    """The OT of ``acc`` (channels last, int32 or int64 within the plan's bound) as int8.

    ``out``: an int8 array of ``acc``'s shape to write into (a transposed view of the caller's
    NCHW output, say: the last pass then does the layout change, no extra copy). ``consume``:
    the caller no longer needs ``acc``; a writable int32 one is then the working buffer (no
    fresh buffer to allocate and fault in)."""
    y = np.empty(acc.shape, np.int8) if out is None else out
    if plan.zero:
        y.fill(0)
        return y
    own = consume and acc.dtype == np.int32 and acc.flags.writeable
    t = acc if own else np.empty(acc.shape, np.int32)
    np.add(acc, plan.first_add, out=t, casting="unsafe")  # exact: |acc| + r <= 2**31 - 1
    for op, operand in plan.steps:  # a handful of whole-tensor passes
        if op == "add":
            np.add(t, operand, out=t)
        elif op == "shr":
            np.right_shift(t, operand, out=t)
        elif op == "mul":
            np.multiply(t, operand, out=t)
        elif op == "shl":
            _shl_wrap(t, operand)
        else:
            np.clip(t, -SAT16, SAT16, out=t)
    np.clip(t, -128, 127, out=y, casting="unsafe")
    return y


__all__ = ["FusedOt", "frozen_operand", "plan_ot", "run_fused"]
