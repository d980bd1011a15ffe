"""Per-layer error statistics against the float model, accumulated over batches.

For every lowered layer the simulator compares the layer's dequantized output with the float
executor's value of the same tensor:

- SQNR in dB, ``10 log10(Σ ref² / Σ (deq - ref)²)`` (``inf`` when the two are equal);
- cosine similarity of the flattened tensors;
- the error in output LSBs: the codes the target produced against the codes an ideal quantizer
  with the layer's own output parameters gives for the float value
  (``Encoding.quantize``), on the encoding's LSB grid (``Encoding.lsb_index``). This error
  includes what earlier layers passed on, exactly as the deployed network would;
- a histogram of that LSB error (``-HIST_RANGE .. HIST_RANGE``, tails folded into the ends);
- every counter the layer reported, summed.

Sums are kept in float64 (these are measurements, not emulated arithmetic).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.program import QTensor

HIST_RANGE = 8


@dataclass
class LayerAccumulator:
    """Running sums for one layer; :meth:`finish` freezes them into :class:`LayerStats`."""

    elements: int = 0
    ref_sq: float = 0.0
    err_sq: float = 0.0
    deq_sq: float = 0.0
    dot: float = 0.0
    max_lsb: int = 0
    off_by_one: int = 0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(2 * HIST_RANGE + 1, np.int64))
    counters: Counter = field(default_factory=Counter)
    encoding_text: str = ""
    unreferenced: bool = False  # no float reference was given (a compiled model)

    def update(self, tensor: QTensor, reference: np.ndarray | None, counters) -> None:
        """Add one batch: the layer's output ``tensor`` and the float ``reference`` (``None``
        for a model without a float meaning: only the counters are kept)."""
        if reference is None:
            self.elements += tensor.codes.size
            self.encoding_text = tensor.encoding.describe()
            self.counters.update({k: int(v) for k, v in counters.items()})
            self.unreferenced = True
            return
        ref = np.asarray(reference, dtype=np.float64)
        deq = tensor.dequantize().astype(np.float64)
        if deq.shape != ref.shape:
            # A silent reshape would scramble a layout mismatch (e.g. NHWC codes) into garbage.
            raise InvalidInputError(
                f"layer output {tensor.codes.shape} does not match the float tensor "
                f"{ref.shape}; a lowering must keep codes in the graph's layout"
            )
        err = deq - ref
        self.elements += ref.size
        self.ref_sq += float(np.sum(ref * ref))
        self.err_sq += float(np.sum(err * err))
        self.deq_sq += float(np.sum(deq * deq))
        self.dot += float(np.sum(deq * ref))
        enc = tensor.encoding
        self.encoding_text = enc.describe()
        ideal = enc.lsb_index(enc.quantize(reference.astype(np.float32)))
        lsb = enc.lsb_index(tensor.codes) - ideal
        if lsb.size:
            self.max_lsb = max(self.max_lsb, int(np.abs(lsb).max()))
            self.off_by_one += int(np.count_nonzero(lsb))
            clipped = np.clip(lsb, -HIST_RANGE, HIST_RANGE) + HIST_RANGE
            self.hist += np.bincount(clipped.ravel(), minlength=self.hist.size)
        self.counters.update({k: int(v) for k, v in counters.items()})

    def finish(self) -> dict:
        """SQNR, cosine, LSB statistics and counters as plain values."""
        if self.err_sq == 0.0:
            sqnr = math.inf
        elif self.ref_sq == 0.0:
            sqnr = -math.inf
        else:
            sqnr = 10.0 * math.log10(self.ref_sq / self.err_sq)
        norm = math.sqrt(self.ref_sq * self.deq_sq)
        cosine = self.dot / norm if norm > 0 else (1.0 if self.err_sq == 0.0 else 0.0)
        if self.unreferenced:  # nothing to compare with: no statistic, only the counters
            sqnr = cosine = math.nan
        return {
            "elements": self.elements,
            "sqnr_db": sqnr,
            "cosine": cosine,
            "max_abs_lsb": self.max_lsb,
            "fraction_off": (
                math.nan
                if self.unreferenced
                else (self.off_by_one / self.elements if self.elements else 0.0)
            ),
            "lsb_histogram": self.hist.tolist(),
            "counters": dict(self.counters),
        }


def top1(logits: np.ndarray) -> np.ndarray:
    """Predicted class per sample: argmax over the last axis of ``(N, classes)`` outputs."""
    logits = np.asarray(logits)
    return logits.reshape(logits.shape[0], -1).argmax(axis=1)
