"""CACC: 48-bit saturating accumulation of CMAC partial sums, then CLIP_TRUNCATE (§5).

The accumulator clamps to 48 bits after every step (order matters once a rail is reached), the
result is rounded by ``CLIP_TRUNCATE`` half away from zero and saturated to int32; the status
register ``D_OUT_SATURATION`` counts the lanes that the int32 saturation changed. The step-wise
clamp is :func:`quantemu.intmath.accumulate` (``PER_PRODUCT``), which pays the order-faithful
evaluation only for lanes whose exact running sum leaves the 48-bit range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.registers import CaccRegisters, Precision
from quantemu.errors import InvalidInputError
from quantemu.intmath import Granularity, accumulate, saturate_count, shift_right_round_half_away

ACC_BITS = 48
# The widths of a CMAC partial sum the cmod keeps (§5): INT8 22-bit, INT16 38-bit signed.
PARTIAL_BITS = {Precision.INT8: 22, Precision.INT16: 38}


@dataclass(frozen=True)
class CaccResult:
    """``y`` (int32 per lane) and ``SAT_COUNT`` (``D_OUT_SATURATION.SAT_COUNT``)."""

    y: np.ndarray
    SAT_COUNT: int


def _accumulate48(p: np.ndarray) -> np.ndarray:
    """The 48-bit per-step clamp, paid only on lanes that could reach a rail.

    A lane whose ``sum |P[k]|`` stays below ``2^47`` never leaves the range at any step, so its
    result is the plain sum (one vectorised pass). The others go through
    :func:`~quantemu.intmath.accumulate` with ``PER_PRODUCT`` clamping: starting from 0, the
    first step is ``P[0]`` itself (``|P[0]| < 2^37`` never clamps), then the clamp after every
    further step is the page's loop. ``K * 2^37`` stays far inside int64 for any K < 2^26.
    """
    risky = np.abs(p).sum(axis=0) >= 1 << (ACC_BITS - 1)
    acc = p.sum(axis=0)
    if np.any(risky):
        acc[risky] = accumulate(
            p[:, risky], bits=ACC_BITS, granularity=Granularity.PER_PRODUCT, axis=0
        )
    return acc


def cacc(partials, regs: CaccRegisters) -> CaccResult:
    """Accumulate ``partials`` (``[K, ...]``, step-major) in 48 bits, round, saturate to int32."""
    p = np.asarray(partials)
    if p.dtype.kind not in "iu" or p.ndim == 0 or p.shape[0] == 0:
        raise InvalidInputError(
            f"cacc: P must be an integer array [K, ...] with K >= 1 steps, got dtype {p.dtype} "
            f"shape {p.shape}"
        )
    p = p.astype(np.int64)
    bits = PARTIAL_BITS[regs.precision]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if p.min() < lo or p.max() > hi:
        raise InvalidInputError(
            f"cacc: {regs.precision.name} partial sums are {bits}-bit signed [{lo}, {hi}] (the "
            f"CMAC output width), got values in [{p.min()}, {p.max()}]"
        )
    acc = _accumulate48(p)
    q = shift_right_round_half_away(acc, regs.CLIP_TRUNCATE)
    y, n = saturate_count(q, 32)
    return CaccResult(np.asarray(y, dtype=np.int32), int(np.sum(n)))
