"""What the SDP and the CDP return, whatever their precision: the output word and the counters.

The INT8/INT16 pipelines (:mod:`..sdp`, :mod:`..cdp`) and the FP16 ones (:mod:`.fp16.sdp`,
:mod:`.fp16.cdp`) build the same result types, so a caller reads one set of counters by their
register names (``conformance/nvdla.md`` §2.2, §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SdpResult:
    """Output of the SDP: ``y`` (int16, the 16-bit output word) and the status counters.

    Counter names are the page's (§2.2); the LUT counters are 0 when the LUT is inactive.
    ``final_clamped`` is not a hardware counter: quantemu's count of the elements the final
    INT8/INT16 clamp changed (which ``OUT_SATURATION`` never counts, §2.5); it is not part of
    :meth:`counters`. The NaN/Inf status registers are counted by FP16 runs only (``fp16``:
    processing or output in FP16) and are part of :meth:`counters` there.
    """

    COUNTERS = ("OUT_SATURATION", "LUT_UFLOW", "LUT_OFLOW", "LUT_HYBRID", "LUT_LE_HIT",
                "LUT_LO_HIT", "STATUS_UNEQUAL")  # fmt: skip
    FP16_COUNTERS = ("STATUS_NAN_INPUT_NUM", "STATUS_INF_INPUT_NUM", "STATUS_NAN_OUTPUT_NUM")

    y: np.ndarray
    OUT_SATURATION: int
    LUT_UFLOW: int
    LUT_OFLOW: int
    LUT_HYBRID: int
    LUT_LE_HIT: int
    LUT_LO_HIT: int
    STATUS_UNEQUAL: int
    final_clamped: int = 0
    STATUS_NAN_INPUT_NUM: int = 0
    STATUS_INF_INPUT_NUM: int = 0
    STATUS_NAN_OUTPUT_NUM: int = 0
    fp16: bool = False

    def counters(self) -> dict[str, int]:
        """The counters by register name (with the NaN/Inf ones for an FP16 run)."""
        names = self.COUNTERS + (self.FP16_COUNTERS if self.fp16 else ())
        return {n: getattr(self, n) for n in names}


@dataclass(frozen=True)
class CdpResult:
    """Output of the CDP: ``y`` (int8 or int16; fp16 words in FP16) and the status counters
    (§3.1)."""

    COUNTERS = ("OUT_SATURATION", "PERF_LUT_UFLOW", "PERF_LUT_OFLOW", "PERF_LUT_HYBRID",
                "PERF_LUT_LE_HIT", "PERF_LUT_LO_HIT")  # fmt: skip

    y: np.ndarray
    OUT_SATURATION: int
    PERF_LUT_UFLOW: int
    PERF_LUT_OFLOW: int
    PERF_LUT_HYBRID: int
    PERF_LUT_LE_HIT: int
    PERF_LUT_LO_HIT: int

    def counters(self) -> dict[str, int]:
        """The counters by register name."""
        return {n: getattr(self, n) for n in self.COUNTERS}
