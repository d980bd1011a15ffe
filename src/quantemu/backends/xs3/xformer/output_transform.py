"""The XC_conv2d_v2 output-transform (OT) solver of xcore-opt 1.4.2 (lib_nn ``OutputTransformFn``).

xcore-opt turns each conv's requantisation ``y = clamp(round(acc * eff + cbias))`` into 16-bit
VPU parameters at compile time. This module reproduces that derivation bit for bit
(``notes/xformer.md`` section 1, steps 1 to 6): the float32 effective multiplier and
canonical bias, the back-propagation of the int8 output clamp onto an accumulator range, the
GROUP quantizer (one ``A``/``M`` for the layer, with the ``-1`` bias LSB), the CHANNELWISE
quantizer, and the error check that picks GROUP, CHANNELWISE or a revert to the TFLite op.

Inputs are the int8 weights as ``(C_out, K)`` rows (a conv's OHWI filter flattened; a
depthwise filter's taps of one channel per row), the int32 bias (or ``None``), and the TFLite
float32 scales and zero points. The searches iterate over exponents (a handful of steps), each
step vectorised over channels; the C code's channel-order dependence (the first failing channel
decides what to lower) is kept.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

from quantemu.backends.xs3.xformer.ot_quantizers import (
    quantize_channelwise,
    quantize_group,
)
from quantemu.errors import InvalidInputError
from quantemu.intmath import wrap

DEFAULT_ERR_THRESHOLD = 0.25  #: ``--xcore-conv-err-threshold``
DEFAULT_MULTIPLIER_FACTOR = 0xFFFFFFFF  #: ``--xcore-conv-multiplier-factor`` (UINT32_MAX)
_ERR_CHUNK = 1 << 22  # accumulators per slice of the full error scan


class OtKind(enum.Enum):
    """What xcore-opt made of a conv: custom option ``t`` (0/1), or the reverted TFLite op."""

    GROUP = 0
    CHANNELWISE = 1
    REVERT_TO_TFLITE = 2


@dataclasses.dataclass(frozen=True)
class Canonical:
    """Per-channel canonical form after ``backprop_output_clamps_to_accu_limits``.

    ``eff``/``cbias``: the float32 values as computed (widened to float64 losslessly);
    ``mul``/``bias``: what the quantizers see (0 and the truncated output for channels whose
    accumulator range collapsed); ``acc_min``/``acc_max``: the back-propagated range.
    """

    eff: np.ndarray
    cbias: np.ndarray
    mul: np.ndarray
    bias: np.ndarray
    acc_min: np.ndarray
    acc_max: np.ndarray


@dataclasses.dataclass(frozen=True)
class OutputTransform:
    """A solved OT. ``shift`` is per channel: ``initial_shr`` repeated for GROUP (it may be
    negative), the VLSAT shifts ``>= 0`` for CHANNELWISE. ``mul``/``bias``/``shift`` are int16.
    For ``REVERT_TO_TFLITE`` the arrays hold the rejected channelwise solution."""

    kind: OtKind
    mul: np.ndarray
    bias: np.ndarray
    shift: np.ndarray
    initial_shr: int
    final_shr: int
    error: float
    canonical: Canonical


def effective_multipliers(s_in, s_w, s_out, factor=DEFAULT_MULTIPLIER_FACTOR) -> np.ndarray:
    """``eff[c] = float32(double(s_in) * double(s_w[c]) / double(s_out))``, then the clamp to
    ``float32(min(eff) * float32(factor))`` (``ConvPatternsTFL.cpp: getArgs``; no-op by default).

    >>> effective_multipliers(np.float32(0.5), np.float32([0.25, 0.125]), np.float32(0.1)).tolist()
    [1.25, 0.625]
    """
    s_in64 = np.float64(np.float32(s_in))
    s_w64 = np.asarray(s_w, dtype=np.float32).astype(np.float64).reshape(-1)
    s_out64 = np.float64(np.float32(s_out))
    if s_out64 == 0 or not np.isfinite(s_out64):
        raise InvalidInputError(f"output scale must be finite and nonzero, got {s_out!r}")
    eff = ((s_in64 * s_w64) / s_out64).astype(np.float32)
    cap = np.float32(eff.min() * np.float32(factor)) if eff.size else np.float32(0)
    return np.minimum(eff, cap)


def canonicalise(weights, bias, *, s_in, zp_in, s_w, s_out, zp_out) -> Canonical:
    """``canonicalise_mul_and_bias`` (and ``_dw``) followed by the clamp back-propagation.

    ``cbias = f32(f32(f32(wrap32(bias - zp_in * sum(w))) * eff) + zp_out)``: float32 arithmetic,
    as the C does with its ``std::vector<float>`` multipliers. ``acc`` limits are the int8 input
    extremes against each weight; ``[lo, hi] = [floor(f32((-128-cbias)/eff)),
    ceil(f32((127-cbias)/eff))]`` (double division) is intersected with them.
    """
    w = np.asarray(weights)
    if w.ndim != 2 or w.dtype != np.int8:
        raise InvalidInputError(
            f"weights must be an int8 (C_out, K) array, got {w.dtype} {w.shape}"
        )
    c_out = w.shape[0]
    b = np.zeros(c_out, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    if b.shape != (c_out,):
        raise InvalidInputError(f"bias has {b.size} values for {c_out} output channels")
    eff = effective_multipliers(s_in, s_w, s_out)
    if eff.size == 1 and c_out != 1:
        eff = np.repeat(eff, c_out)
    if eff.shape != (c_out,):
        raise InvalidInputError(f"{eff.size} weight scales for {c_out} output channels")
    w64 = w.astype(np.int64)
    coefs = w64.sum(axis=1)
    acc_max = np.where(w64 > 0, 127 * w64, -128 * w64).sum(axis=1)
    acc_min = np.where(w64 > 0, -128 * w64, 127 * w64).sum(axis=1)
    folded = wrap(b - int(zp_in) * coefs, 32).astype(np.float32)
    cbias = (folded * eff) + np.float32(int(zp_out))
    return _backprop(eff.astype(np.float64), cbias.astype(np.float64), acc_min, acc_max)


def _backprop(eff, cbias, acc_min, acc_max) -> Canonical:
    zero = eff == 0.0
    safe = np.where(zero, 1.0, eff)
    hi = (127.0 - cbias) / safe
    lo = (-128.0 - cbias) / safe
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    # round_up/round_down take a float argument: the double is narrowed before ceil/floor
    top = np.minimum(np.ceil(hi.astype(np.float32)).astype(np.int64), acc_max)
    bot = np.maximum(np.floor(lo.astype(np.float32)).astype(np.int64), acc_min)
    single = (top <= bot) & ~zero
    # (int32_t)original_bias truncates toward zero before the int8 clamp
    fixed = np.clip(np.trunc(cbias), -128, 127)
    mul = np.where(zero | single, 0.0, eff)
    bias = np.where(zero, 0.0, np.where(single, fixed, cbias))
    keep = ~(zero | single)
    return Canonical(
        eff=eff,
        cbias=cbias,
        mul=mul,
        bias=bias,
        acc_min=np.where(keep, bot, 0),
        acc_max=np.where(keep, top, 0),
    )


def group_error_estimate(final_shr: int) -> float:
    """The group OT's error as xcore-opt estimates it: ``2**-(final_shr + 7)``.

    >>> [group_error_estimate(f) for f in (-8, -6, -5, 0)]
    [2.0, 0.5, 0.25, 0.0078125]
    """
    return float(np.ldexp(1.0, -(int(final_shr) + 7)))


def _round_half_away(v: np.ndarray) -> np.ndarray:
    t = np.trunc(v)
    frac = v - t  # exact for doubles
    return t + np.where(frac >= 0.5, 1.0, 0.0) - np.where(frac <= -0.5, 1.0, 0.0)


def _model_ot(acc, shift, mul, bias, final_shr):
    """``get_quant_error``'s model of the OT: 17-bit saturation (``sat(a, 16)`` keeps
    ``[-2**16, 2**16 - 1]``) and ``[-256, 255]`` after the depth-8 shift."""

    def sat(v, bits):
        return np.clip(v, -(1 << bits), (1 << bits) - 1)

    def shr(v, s):
        s = np.asarray(s, np.int64)
        rs = np.maximum(s, 1)
        right = (v + (np.int64(1) << (rs - 1))) >> rs
        return sat(np.where(s > 0, right, np.left_shift(v, np.maximum(-s, 0))), 16)

    t = shr(acc, shift)
    t = sat((t * mul + (1 << 13)) >> 14, 16)
    t = sat(t + bias, 16)
    t = shr(t, final_shr)
    return sat(shr(t, 8), 8)


def full_error(can: Canonical, shift, mul, bias, final_shr: int) -> float:
    """``get_quant_error(..., true)``: the largest per-channel mean of
    ``|model_OT(acc) - clamp(round_half_away(acc * mul + bias), -128, 127)|`` over every
    ``acc`` of the channel's back-propagated range (float64 reference)."""
    n = (can.acc_max - can.acc_min + 1).astype(np.int64)
    sums = np.zeros(n.size, np.float64)
    order = np.arange(n.size)
    start = 0
    while start < n.size:
        stop = start + 1
        while stop < n.size and n[start : stop + 1].sum() <= _ERR_CHUNK:
            stop += 1
        ch = np.repeat(order[start:stop], n[start:stop])
        offs = np.arange(ch.size) - np.repeat(
            np.cumsum(n[start:stop]) - n[start:stop], n[start:stop]
        )
        acc = can.acc_min[ch] + offs
        got = _model_ot(
            acc,
            np.asarray(shift, np.int64)[ch],
            np.asarray(mul, np.int64)[ch],
            np.asarray(bias, np.int64)[ch],
            final_shr,
        )
        want = np.clip(_round_half_away(acc * can.mul[ch] + can.bias[ch]), -128, 127)
        sums += np.bincount(ch, np.abs(want - got), minlength=n.size)
        start = stop
    return float((sums / n).max()) if n.size else 0.0


def solve_output_transform(
    weights,
    bias,
    *,
    s_in,
    zp_in,
    s_w,
    s_out,
    zp_out,
    threshold: float = DEFAULT_ERR_THRESHOLD,
    force_full_check: bool = False,
) -> OutputTransform:
    """What xcore-opt 1.4.2 emits for one conv (``ReplaceConv2DPattern::
    getOutputTransformParams``): the group OT unless its error (estimated from ``final_shr``,
    or scanned with ``force_full_check``) exceeds ``threshold``; then the channelwise OT unless
    its fully scanned error exceeds it too, in which case the op is reverted to TFLite.
    """
    can = canonicalise(weights, bias, s_in=s_in, zp_in=zp_in, s_w=s_w, s_out=s_out, zp_out=zp_out)
    mul, b16, ishr, fshr = quantize_group(can.mul, can.bias, can.acc_min, can.acc_max)
    shift = np.full(mul.shape, ishr, np.int16)
    err = full_error(can, shift, mul, b16, fshr) if force_full_check else group_error_estimate(fshr)
    if err <= threshold:
        return OutputTransform(OtKind.GROUP, mul, b16, shift, ishr, fshr, err, can)
    shift, mul, b16, fshr = quantize_channelwise(can.mul, can.bias, can.acc_min, can.acc_max)
    err = full_error(can, shift, mul, b16, fshr)
    kind = OtKind.CHANNELWISE if err <= threshold else OtKind.REVERT_TO_TFLITE
    first = int(shift[0]) if shift.size else 0
    return OutputTransform(kind, mul, b16, shift, first, fshr, err, can)
