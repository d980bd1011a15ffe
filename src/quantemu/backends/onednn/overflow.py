"""Overflow-risk analysis: which s8 weight pairs can saturate ``VPMADDUBSW`` on non-VNNI ISAs.

Given the weights of a linear or convolution layer (and optionally the range of the activation
values that meet them), report the output channels and the operand pairs whose s16 pair sum can
leave ``[-32768, 32767]`` on ``avx2``/``avx512_core``, the largest error that saturation can put
into one output, and the remedies of seed 002: u7 activations, s7 weights, PyTorch's
``reduce_range``, or a VNNI/AMX machine.

The bound is the same one the fast kernels use (:func:`.pairsum.risky_pairs`): with activations
in ``[lo, hi]``, pair ``(k0, k1)`` of channel ``o`` reaches
``max(lo·w0, hi·w0) + max(lo·w1, hi·w1)`` at most and the matching minimum at least, and both
extremes are attained by some activation vector. Pairs are disjoint within one output, so the
per-channel worst cases add up exactly: ``max_error`` is attained, not just an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.im2col import segment_layout
from quantemu.backends.onednn.pairsum import S16_MAX, S16_MIN
from quantemu.backends.onednn.params import ConvImpl, Isa, SrcType, as_enum, check_operand
from quantemu.errors import InvalidInputError


@dataclass(frozen=True)
class Remedy:
    """One way out of saturation, and whether it removes every risky pair of this layer."""

    name: str
    description: str
    removes_risk: bool


@dataclass(frozen=True)
class OverflowReport:
    """Where VPMADDUBSW saturation can strike in one layer.

    ``channels``: output channels with at least one risky pair. ``pairs``: ``(R, 3)`` rows
    ``(channel, k0, k1)``, indices into the channel's flattened weights (``w[o].ravel()``).
    ``max_error``: per output channel, the largest ``|saturated − exact|`` of one output over all
    activations in ``activation_range`` (0 where nothing can saturate).
    """

    isa: Isa
    src_dt: SrcType
    activation_range: tuple[int, int]
    channels: np.ndarray
    pairs: np.ndarray
    max_error: np.ndarray
    remedies: tuple[Remedy, ...]
    notes: tuple[str, ...] = ()

    @property
    def can_saturate(self) -> bool:
        """True when at least one pair can saturate."""
        return bool(self.pairs.shape[0])


def linear_overflow_risk(
    w: np.ndarray,
    isa: Isa | str,
    *,
    src_dt: SrcType | str = SrcType.U8,
    activation_range: tuple[int, int] | None = None,
) -> OverflowReport:
    """Risk for a linear/matmul layer with weights ``w (N, K)`` (PyTorch layout), pairs along K.

    ``activation_range``: ``[lo, hi]`` of the source values (u8, or s8 before the +128 shift);
    default the whole type. Not modelled here (page §3): the AVX2 matmul with an s8 source and a
    non-zero zero point is exact, and ``gemm_s8s8s32`` on ``avx512_core`` with ``N = 1`` pairs
    ``B + 128`` with ``A`` instead.
    """
    w = _check_weights(w, 2, "linear_overflow_risk")
    isa = as_enum(Isa, isa, "isa")
    src_dt = as_enum(SrcType, src_dt, "src_dt")
    k = w.shape[1]
    slots = np.arange(k + k % 2)
    slots[k:] = -1  # an odd K pairs its last weight with a zero
    w2 = w.reshape(w.shape[0], -1)
    return _analyse(
        w2, slots, isa, src_dt, activation_range=activation_range, notes=(), exact=isa.exact
    )


def conv_overflow_risk(
    w: np.ndarray,
    isa: Isa | str,
    impl: ConvImpl | str = ConvImpl.DIRECT,
    *,
    src_dt: SrcType | str = SrcType.U8,
    activation_range: tuple[int, int] | None = None,
) -> OverflowReport:
    """Risk for a convolution with weights ``w (O, C/groups, KH, KW)`` and pairing ``impl``."""
    w = _check_weights(w, 4, "conv_overflow_risk")
    isa = as_enum(Isa, isa, "isa")
    impl = as_enum(ConvImpl, impl, "impl")
    src_dt = as_enum(SrcType, src_dt, "src_dt")
    _, cg, kh, kw = w.shape
    layout = segment_layout(impl, cg, kh, kw)
    # Slot -> index into w[o].ravel() (C/groups, KH, KW order); -1 on padding slots.
    slots = np.where(layout.c < 0, -1, (layout.c * kh + layout.kh) * kw + layout.kw)
    exact = isa.exact
    notes: tuple[str, ...] = ()
    if impl is ConvImpl.REF:
        exact, notes = True, ("impl = 'ref' is exact",)
    elif src_dt is SrcType.S8 and not isa.exact:
        exact = True
        notes = (
            "s8-source convolution halves the weights (2·rne(w/2)): |w/2| <= 64 never "
            "saturates, but every odd weight moves to an even neighbour",
        )
    w2 = w.reshape(w.shape[0], -1)
    return _analyse(
        w2, slots, isa, src_dt, activation_range=activation_range, notes=notes, exact=exact
    )


def _analyse(w2, slots, isa, src_dt, *, activation_range, notes, exact) -> OverflowReport:
    """The report for weights ``w2 (O, R)`` paired in the order of ``slots`` (``-1``: zero)."""
    lo, hi = _unsigned_range(src_dt, activation_range)
    over, under = _excess(w2, slots, lo, hi)
    if exact:
        over, under = np.zeros_like(over), np.zeros_like(under)
    ch, j = np.nonzero((over > 0) | (under > 0))
    pairs = np.stack([ch, slots[2 * j], slots[2 * j + 1]], axis=1).astype(np.int64)
    max_error = np.maximum(over.sum(axis=1, dtype=np.int64), under.sum(axis=1, dtype=np.int64))
    remedies = _remedies(w2, slots, src_dt, (lo, hi)) if ch.size else ()
    return OverflowReport(
        isa,
        src_dt,
        (lo, hi),
        np.unique(ch).astype(np.int64),
        pairs.reshape(-1, 3),
        max_error,
        remedies,
        notes,
    )


def _excess(w2, slots, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (channel, pair): how far the pair sum can rise above 32767 / fall below -32768."""
    # Weights in slot order (0 on padding slots), (O, L); |lo·w|, |hi·w| <= 255·128 fit int32.
    ws = np.where(slots < 0, 0, w2[:, np.maximum(slots, 0)]).astype(np.int32)
    hi_p = np.maximum(lo * ws, hi * ws)
    lo_p = np.minimum(lo * ws, hi * ws)
    over = np.maximum(hi_p[:, 0::2] + hi_p[:, 1::2] - S16_MAX, 0)
    under = np.maximum(S16_MIN - (lo_p[:, 0::2] + lo_p[:, 1::2]), 0)
    return over, under


def _fixed(w2, slots, lo: int, hi: int) -> bool:
    over, under = _excess(w2, slots, lo, hi)
    return not (over.any() or under.any())


def _remedies(w2, slots, src_dt, rng: tuple[int, int]) -> tuple[Remedy, ...]:
    """The seed's remedies, each checked against this layer by re-running the bound."""
    u8 = src_dt is SrcType.U8
    lo, hi = rng  # unsigned-operand range
    u7_fixes = u8 and _fixed(w2, slots, min(lo, 127), min(hi, 127))
    # The s7 range [-64, 63] never saturates (255·64·2 = 32640); checked all the same.
    s7_fixes = _fixed(np.clip(w2, -64, 63), slots, lo, hi)
    return (
        Remedy(
            "u7 activations",
            "quantize the source to [0, 127] instead of [0, 255]"
            if u8
            else "not applicable: an s8 source is fed as x + 128, which fills [0, 255]; only "
            "[-128, -1] would help",
            u7_fixes,
        ),
        Remedy(
            "s7 weights",
            "quantize the weights to [-64, 63] (e.g. scale 63 / max|w|, as seed 002 recommends "
            "for RNN weights)",
            s7_fixes,
        ),
        Remedy(
            "reduce_range",
            "PyTorch's reduce_range=True quantizes activations to 7 bits ([0, 127]), the default "
            "of its x86 qconfig",
            u7_fixes,
        ),
        Remedy("VNNI/AMX", "run on avx2_vnni, avx512_core_vnni or AMX: VPDPBUSD is exact", True),
    )


def _unsigned_range(src_dt: SrcType, rng: tuple[int, int] | None) -> tuple[int, int]:
    """The range of the unsigned operand: u8 values, or s8 values + 128."""
    full = (0, 255) if src_dt is SrcType.U8 else (-128, 127)
    lo, hi = full if rng is None else (int(rng[0]), int(rng[1]))
    if not full[0] <= lo <= hi <= full[1]:
        raise InvalidInputError(
            f"activation_range = {rng} must satisfy {full[0]} <= lo <= hi <= {full[1]} for an "
            f"{src_dt.value} source"
        )
    shift = 0 if src_dt is SrcType.U8 else 128
    return lo + shift, hi + shift


def _check_weights(w: np.ndarray, ndim: int, where: str) -> np.ndarray:
    check_operand(w, f"{where}: w", np.int8, ndim)
    return w
