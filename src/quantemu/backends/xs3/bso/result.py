"""What every XS3 operator returns: the output tensor plus counters for reports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class OpResult:
    """The output of one operator call and what happened on the way.

    ``y``: the int8 (int16 for the 16-bit operators) output tensor.
    ``acc``: the int32 accumulators the output stage consumed, shaped like ``y``.
    ``acc_saturated``: outputs whose 32-bit accumulator clamped at +-(2^31 - 1) at least once.
    ``acc_wrapped``: outputs whose accumulator wrapped around (host depthwise and legacy fc,
    which add in plain int32) or, for the legacy fc, was lifted off -2^31.
    ``shift1_saturated``: outputs where SAT_16 after the first shift engaged.
    ``output_saturated``: outputs where the final clamp to the output range engaged.
    ``rounding_wrapped``: outputs where an int32 rounding add wrapped (host artifact, ``RSHR_W``).
    ``y_raw``: for the BSO operators, the int64 output before the final clamp, shaped like ``y``
    (tells which side a saturation struck); ``None`` for the legacy fc.
    """

    y: np.ndarray
    acc: np.ndarray
    acc_saturated: int
    acc_wrapped: int
    shift1_saturated: int
    output_saturated: int
    rounding_wrapped: int
    y_raw: np.ndarray | None = None

    def counters(self) -> dict[str, int]:
        """Every counter by name (for reports)."""
        return {
            "acc_saturated": self.acc_saturated,
            "acc_wrapped": self.acc_wrapped,
            "shift1_saturated": self.shift1_saturated,
            "output_saturated": self.output_saturated,
            "rounding_wrapped": self.rounding_wrapped,
        }


def make_result(
    y: np.ndarray,
    accumulated: tuple[np.ndarray, np.ndarray, np.ndarray],
    counters: dict[str, int],
    shape: tuple[int, ...],
    y_raw: np.ndarray | None = None,
) -> OpResult:
    """Assemble an :class:`OpResult`, reshaping ``y``, ``acc`` (and ``y_raw``) to ``shape``.

    ``accumulated`` is ``(acc, saturated, wrapped)`` as the accumulation functions return it.
    """
    acc, saturated, wrapped = accumulated
    return OpResult(
        y=y.reshape(shape),
        acc=acc.reshape(shape),
        acc_saturated=int(np.count_nonzero(saturated)),
        acc_wrapped=int(np.count_nonzero(wrapped)),
        **counters,
        y_raw=None if y_raw is None else y_raw.reshape(shape),
    )
