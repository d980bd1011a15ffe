"""The SDP pipeline of :mod:`.sdp`, fused for lowered layers: same values, same counters.

:func:`~.sdp.sdp` is the specification: it decodes the registers and runs every stage on int64
arrays on each call, about fifteen passes per output. A :class:`SdpPlan` decodes the registers
once (at lowering) and precomputes what depends only on them and on the per-channel operands
(the ALU operands shifted and saturated to int32, their ranges). At run time it carries an
interval ``[lo, hi]`` that provably holds every value of the working array (from the input's
dtype, or a bound the caller proves, e.g. the convolution's ``max_m sum_k |w| * 128``) and uses
it to

* work in int32 when the interval of every result fits int32, int64 otherwise (never past
  ``2^62``: a larger interval takes the reference path);
* skip a saturation, a clamp or a counter whose event the interval rules out (it counts 0
  because it cannot happen), and write the others in place into one owned buffer;
* round half away in two or four in-place passes, and apply a ReLU before the rounding, where
  ``relu(sat(rhaz(m))) == sat(rhaz(relu(m)))`` holds for every ``m``;
* count the converter's ±1-rule flag on the unrounded product (``floor(p / 2^s) > 65536`` is
  ``p >= 65537 * 2^s``) and the final clamp from the comparison that selects it.

What it does not fuse (the LUT, compare mode, PReLU in the Y unit, per-element X operands,
inputs it cannot bound) runs through :func:`~.sdp.sdp` itself, so the fast path never has to be
right about a rare case. ``tests/backends/nvdla/test_nvdla_sdp_fast.py`` checks it against
:func:`~.sdp.sdp` with ``==`` on random registers and data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.precision import shifter, shr
from quantemu.backends.nvdla.registers import (
    AluAlgo,
    Converter,
    OperandSource,
    Precision,
    SdpRegisters,
    XUnit,
    YUnit,
)
from quantemu.backends.nvdla.results import SdpResult
from quantemu.intmath import wrap

I32_LO, I32_HI = -(1 << 31), (1 << 31) - 1
SAFE = 1 << 62  # every interval stays inside int64 with room for a rounding bias
FLAG_EDGE = 65537  # the 17-bit step's ±1 rule: floor outside [-65537, 65536] is flagged
EW_OPERANDS = ("EW_ALU", "EW_MUL")


class Fallback(Exception):
    """The fused path does not cover this call; the caller runs the reference :func:`sdp`."""


def _rhaz_int(v: int, s: int) -> int:
    h = 1 << (s - 1)
    return (v + h) >> s if v >= 0 else -((-v + h) >> s)


class _Acc:
    """The working array, an interval holding all its values, and whether we may write it."""

    __slots__ = ("a", "hi", "lo", "owned")

    def __init__(self, a: np.ndarray, lo: int, hi: int, owned: bool) -> None:
        self.a, self.lo, self.hi, self.owned = a, lo, hi, owned

    def apply(self, ufunc, op, lo: int, hi: int, wide: bool = False) -> None:
        """``a = ufunc(a, op)`` whose results lie in ``[lo, hi]``: int32 if that fits."""
        if lo < -SAFE or hi > SAFE:
            raise Fallback
        # int32 only when the operand (cast first) and every result fit it
        fits = min(lo, self.lo) >= I32_LO and max(hi, self.hi) <= I32_HI
        narrow = not wide and fits
        dt = np.dtype(np.int32 if narrow else np.int64)
        a = self.a
        if (
            self.owned
            and isinstance(a, np.ndarray)
            and a.dtype == dt
            and (np.ndim(op) == 0 or np.broadcast_shapes(a.shape, np.shape(op)) == a.shape)
        ):
            ufunc(a, op, out=a)
        else:
            self.a = ufunc(a, op, dtype=dt)
        self.lo, self.hi, self.owned = lo, hi, True

    def clamp(self, lo: int, hi: int) -> None:
        """Saturate to ``[lo, hi]``; a side the interval cannot reach is skipped."""
        if self.lo < lo:
            self.apply(np.maximum, lo, lo, max(self.hi, lo))
        if self.hi > hi:
            self.apply(np.minimum, hi, min(self.lo, hi), hi)

    def round_shift(self, s: int) -> None:
        """``a = rhaz(a / 2^s)`` (half away from zero), in place."""
        if s == 0 or (self.lo == 0 and self.hi == 0):
            return
        if s >= 62:
            raise Fallback
        lo, hi, h = self.lo, self.hi, 1 << (s - 1)
        # x >= 0: (x + h) >> s; x < 0: (x + h - 1) >> s (floor of x / 2^s + 1/2, ties down)
        bias = h - 1 if hi < 0 else h
        neg = np.less(self.a, 0) if lo < 0 <= hi else None
        self.apply(np.add, bias, lo + bias, hi + bias, wide=s > 30)
        if neg is not None:
            self.apply(np.subtract, neg, lo + bias - 1, hi + bias, wide=s > 30)
        # int64 for shifts past 30: no int32 shift by its width or more
        self.apply(np.right_shift, s, _rhaz_int(lo, s), _rhaz_int(hi, s), wide=s > 30)

    def times(self, k, klo: int, khi: int) -> None:
        ends = (self.lo * klo, self.lo * khi, self.hi * klo, self.hi * khi)
        self.apply(np.multiply, k, min(ends), max(ends))


@dataclass(frozen=True)
class _Operand:
    """A per-channel (flat, reshaped per call) or scalar operand and its range."""

    value: np.ndarray | int
    lo: int
    hi: int

    @classmethod
    def of(cls, v) -> _Operand:
        if np.ndim(v) == 0:
            return cls(int(v), int(v), int(v))
        arr = np.ascontiguousarray(v, dtype=np.int32)
        arr.setflags(write=False)
        return cls(arr, int(arr.min()), int(arr.max())) if arr.size else cls(0, 0, 0)

    def shaped(self, ndim: int):
        if isinstance(self.value, int):
            return self.value
        return self.value.reshape((1, -1) + (1,) * (ndim - 2))


@dataclass(frozen=True)
class _XPlan:
    unit: XUnit
    alu: _Operand | None
    mul: _Operand | None


def _x_plan(u: XUnit, alu_mem: np.ndarray | None, mul_mem: np.ndarray | None) -> _XPlan:
    alu = mul = None
    if not u.bypass and not u.alu_bypass:
        raw = alu_mem if u.alu_src is OperandSource.MEMORY else None
        raw = np.int64(u.alu_operand) if u.alu_src is OperandSource.REGISTER else raw
        raw = np.int64(0) if raw is None else raw.astype(np.int64)
        alu = _Operand.of(shifter(raw, shift=u.alu_shift, bits=32)[0])  # weight-only: once
    if not u.bypass and not u.mul_bypass:
        k = mul_mem if u.mul_src is OperandSource.MEMORY else np.int64(u.mul_operand)
        mul = _Operand.of(0 if k is None else k)
    return _XPlan(u, alu, mul)


@dataclass(frozen=True)
class SdpPlan:
    """Registers decoded once, per-channel operands prepared once; :meth:`run` is the pass."""

    regs: SdpRegisters
    bs: _XPlan
    bn: _XPlan
    y: YUnit | None  # None: EW bypassed
    cvt: Converter
    channels: int | None  # length of the per-channel operands (None: none)
    fused: bool  # False: LUT or compare mode, always the reference path
    out_bits: int

    @classmethod
    def build(cls, regs: SdpRegisters, channel_operands: Mapping[str, np.ndarray]) -> SdpPlan:
        ops = dict(channel_operands)
        sizes = {v.size for v in ops.values()}
        channels = sizes.pop() if len(sizes) == 1 else None
        fused = not regs.lut_active and not regs.compare_mode and len(sizes) == 0
        fused = fused and not set(ops) & set(EW_OPERANDS)  # per-channel EW: reference
        bits = 8 if regs.out_precision is Precision.INT8 else 16
        return cls(
            regs=regs,
            bs=_x_plan(regs.x_unit("BS"), ops.get("BS_ALU"), ops.get("BS_MUL")),
            bn=_x_plan(regs.x_unit("BN"), ops.get("BN_ALU"), ops.get("BN_MUL")),
            y=None if regs.EW_BYPASS else regs.y_unit(),
            cvt=regs.output_converter(),
            channels=channels,
            fused=fused,
            out_bits=bits,
        )

    def run(
        self, x: np.ndarray, element: Mapping[str, np.ndarray], bound, int8_out: bool = False
    ) -> SdpResult:
        """The pass on ``x``; raises :class:`Fallback` where the reference path must run.

        ``int8_out``: an 8-bit output comes back as int8 (same values), clipped straight into
        it, for callers that store int8 codes anyway (one pass less than int16 then int8)."""
        if not self.fused or x.ndim < 2 or x.size == 0 or set(element) - set(EW_OPERANDS):
            raise Fallback
        if self.channels is not None and self.channels not in (1, x.shape[1]):
            raise Fallback  # the reference raises the shape error
        acc = _Acc(x, *_input_interval(x, bound), owned=False)
        _x_unit(acc, self.bs, x.ndim)
        _x_unit(acc, self.bn, x.ndim)
        if self.y is not None:
            _y_unit(acc, self.y, _element_operands(element, x.shape))
        return self._output(acc, int8_out)

    def _output(self, acc: _Acc, int8_out: bool = False) -> SdpResult:
        c = self.cvt
        if c.offset:
            acc.apply(np.subtract, c.offset, acc.lo - c.offset, acc.hi - c.offset)
        if c.scale != 1:
            acc.times(c.scale, c.scale, c.scale)
        edge = FLAG_EDGE << c.shift
        flags = 0
        if acc.hi >= edge:
            flags += int(np.count_nonzero(acc.a >= edge))
        if acc.lo < -edge:
            flags += int(np.count_nonzero(acc.a < -edge))
        acc.round_shift(c.shift)
        lo, hi = -(1 << (self.out_bits - 1)), (1 << (self.out_bits - 1)) - 1
        clamped = 0
        if acc.hi > hi:
            clamped += int(np.count_nonzero(acc.a > hi))
        if acc.lo < lo:
            clamped += int(np.count_nonzero(acc.a < lo))
        y = np.empty(acc.a.shape, dtype=np.int8 if int8_out and self.out_bits == 8 else np.int16)
        np.clip(acc.a, lo, hi, out=y, casting="unsafe")
        return SdpResult(y=y, OUT_SATURATION=flags, LUT_UFLOW=0, LUT_OFLOW=0, LUT_HYBRID=0,
                         LUT_LE_HIT=0, LUT_LO_HIT=0, STATUS_UNEQUAL=0,
                         final_clamped=clamped)  # fmt: skip


def _input_interval(x: np.ndarray, bound) -> tuple[int, int]:
    if x.dtype.kind not in "iu":
        raise Fallback
    if bound is not None:
        return bound
    if x.dtype.itemsize <= 2 or x.dtype == np.int32:
        info = np.iinfo(x.dtype)
        return int(info.min), int(info.max)
    lo, hi = int(x.min()), int(x.max())
    if lo < I32_LO or hi > I32_HI:
        raise Fallback  # the reference rejects it with its message
    return lo, hi


def _element_operands(element: Mapping[str, np.ndarray], shape) -> dict[str, _Operand]:
    out = {}
    for name, value in element.items():
        if value is None:
            continue
        v = np.asarray(value)
        if v.dtype not in (np.int8, np.int16, np.uint8):
            raise Fallback  # the reference checks the int16 range
        try:
            fits = v.shape == shape or np.broadcast_shapes(v.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise Fallback  # the reference raises the shape error
        info = np.iinfo(v.dtype)
        out[name] = _Operand(v, int(info.min), int(info.max))
    return out


def _x_unit(acc: _Acc, p: _XPlan, ndim: int) -> None:
    """One X unit (§2.3), as :func:`~.sdp.x_unit`."""
    u = p.unit
    if u.bypass:
        return
    if p.alu is not None:
        op, olo, ohi = p.alu.shaped(ndim), p.alu.lo, p.alu.hi
        if u.alu_algo is AluAlgo.MAX:
            acc.apply(np.maximum, op, max(acc.lo, olo), max(acc.hi, ohi))
        elif u.alu_algo is AluAlgo.MIN:
            acc.apply(np.minimum, op, min(acc.lo, olo), min(acc.hi, ohi))
        else:
            acc.apply(np.add, op, acc.lo + olo, acc.hi + ohi)
    if p.mul is not None and u.mul_prelu:
        a = acc.a.astype(np.int64)  # rare (leaky ReLU): the reference expression
        t = shr(a * p.mul.shaped(ndim), u.mul_shift, 32)
        t = np.where(a >= 0, wrap(a, 32), t)
        acc.a, acc.lo, acc.hi, acc.owned = t, I32_LO, I32_HI, True
    else:
        if p.mul is not None:
            acc.times(p.mul.shaped(ndim), p.mul.lo, p.mul.hi)
        if not u.relu_bypass:  # before the rounding: same result, cheaper rounding
            acc.apply(np.maximum, 0, max(acc.lo, 0), max(acc.hi, 0))
        acc.round_shift(u.mul_shift)
        acc.clamp(I32_LO, I32_HI)
        return
    if not u.relu_bypass:
        acc.apply(np.maximum, 0, max(acc.lo, 0), max(acc.hi, 0))


def _ew_operand(src, reg: int, mem: _Operand | None, cvt) -> _Operand:
    if src is OperandSource.REGISTER:
        return _Operand(reg, reg, reg)
    if mem is None:  # an absent operand reads zeros, which still go through the converter
        mem = _Operand(np.zeros((), np.int16), 0, 0)
    if cvt.bypass:
        return mem
    acc = _Acc(mem.value, mem.lo, mem.hi, owned=False)
    if cvt.offset:
        acc.apply(np.subtract, cvt.offset, acc.lo - cvt.offset, acc.hi - cvt.offset)
    acc.times(cvt.scale, cvt.scale, cvt.scale)
    acc.round_shift(cvt.truncate)
    acc.clamp(I32_LO, I32_HI)
    return _Operand(acc.a, acc.lo, acc.hi)


def _y_unit(acc: _Acc, u: YUnit, mem: dict[str, _Operand]) -> None:
    """The Y unit without LUT (§2.4), as :func:`~.sdp.y_unit`; PReLU takes the reference."""
    if not u.mul_bypass:
        if u.mul_prelu:
            raise Fallback
        k = _ew_operand(u.mul_src, u.mul_operand, mem.get("EW_MUL"), u.mul_cvt)
        acc.times(k.value, k.lo, k.hi)
        acc.round_shift(u.truncate)
        acc.clamp(I32_LO, I32_HI)
    if u.alu_bypass:
        return
    k = _ew_operand(u.alu_src, u.alu_operand, mem.get("EW_ALU"), u.alu_cvt)
    if u.alu_algo is AluAlgo.MAX:
        acc.apply(np.maximum, k.value, max(acc.lo, k.lo), max(acc.hi, k.hi))
    elif u.alu_algo is AluAlgo.MIN:
        acc.apply(np.minimum, k.value, min(acc.lo, k.lo), min(acc.hi, k.hi))
    else:  # SUM (EQL is compare mode, never fused)
        acc.apply(np.add, k.value, acc.lo + k.lo, acc.hi + k.hi)
    acc.clamp(I32_LO, I32_HI)
