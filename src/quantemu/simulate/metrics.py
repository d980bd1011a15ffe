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
- every counter the layer reported, summed;
- for a recurrent layer (``step_axis``), the SQNR of each time step (``step_sqnr_db``): the error
  an RNN's re-quantized state compounds over time.

These are measurements, not emulated arithmetic, so they are computed for speed (``evaluate``
spends most of its time here otherwise): each batch's codes are dequantized once (through a
256-entry table for 8-bit per-tensor linear codes, which is exactly ``Encoding.dequantize``
elementwise), the four power sums are float32 dot products over rows of 1024 elements summed
in float64 (relative error about 1e-7, far below the 0.1 dB / 4 decimals reported), and the
LSB error is one small-integer array (a 256-entry ``lsb_index`` table for 8-bit codes). A
batch whose float32 sums could be wrong (overflow, non-finite values, or an error too small to
square in float32) is summed in float64 instead. ``tests/simulate/test_evaluate_stats.py``
checks all of this against the plain float64 formulas.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.program import LinearEncoding, QTensor

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
    step_axis: int | None = None  # the time axis of a recurrent layer's output
    # Per time step: Σ ref² and Σ (deq - ref)² in float64 (None until a batch is added).
    step_sums: tuple[np.ndarray, np.ndarray] | None = None
    # (encoding, dtype, table) of the last 8-bit dequantization table (the same every batch)
    _table: tuple | None = field(default=None, repr=False)

    def update(self, tensor: QTensor, reference: np.ndarray | None, counters) -> None:
        """Add one batch: the layer's output ``tensor`` and the float ``reference`` (``None``
        for a model without a float meaning: only the counters are kept)."""
        self.add(self.measure(tensor, reference, counters))

    def measure(self, tensor: QTensor, reference: np.ndarray | None, counters) -> BatchStats:
        """One batch's statistics, without adding them (batches measured on several threads are
        then added in batch order: the float sums are the same as one ``update`` after the
        other)."""
        enc = tensor.encoding
        stats = BatchStats(
            counters={k: int(v) for k, v in counters.items()},
            encoding_text=enc.describe(),
            elements=int(tensor.codes.size),
        )
        if reference is None:
            return stats
        deq = self._dequantize(tensor)
        if deq.shape != np.shape(reference):
            # A silent reshape would scramble a layout mismatch (e.g. NHWC codes) into garbage.
            raise InvalidInputError(
                f"layer output {tensor.codes.shape} does not match the float tensor "
                f"{np.shape(reference)}; a lowering must keep codes in the graph's layout"
            )
        ref32 = np.asarray(reference, dtype=np.float32)  # no copy for the executor's float32
        stats.sums = _power_sums(deq, reference)
        stats.lsb = _lsb_stats(_lsb_error(tensor.codes, enc.quantize(ref32), enc))
        if self.step_axis is not None:
            stats.steps = _step_sums(deq, ref32, self.step_axis)
        return stats

    def add(self, stats: BatchStats) -> None:
        """Add one batch's :meth:`measure`."""
        self.counters.update(stats.counters)
        self.encoding_text = stats.encoding_text
        self.elements += stats.elements
        if stats.sums is None:
            self.unreferenced = True
            return
        self.ref_sq += stats.sums[0]
        self.deq_sq += stats.sums[1]
        self.dot += stats.sums[2]
        self.err_sq += stats.sums[3]
        if stats.steps is not None:
            ref_t, err_t = stats.steps
            if self.step_sums is not None:
                ref_t, err_t = self.step_sums[0] + ref_t, self.step_sums[1] + err_t
            self.step_sums = (ref_t, err_t)
        if stats.lsb is not None:
            max_lsb, off, hist = stats.lsb
            self.max_lsb = max(self.max_lsb, max_lsb)
            self.off_by_one += off
            self.hist += hist

    def _dequantize(self, tensor: QTensor) -> np.ndarray:
        """``tensor.dequantize()``; a table lookup for 8-bit per-tensor linear codes (identical
        values: the table is the encoding's own dequantization of every byte pattern)."""
        enc, codes = tensor.encoding, tensor.codes
        if not (
            isinstance(enc, LinearEncoding)
            and enc.axis is None
            and type(enc).dequantize is LinearEncoding.dequantize
            and codes.dtype.kind in "iu"
            and codes.dtype.itemsize == 1
        ):
            return tensor.dequantize()
        cached = self._table
        if cached is None or cached[0] is not enc or cached[1] != codes.dtype:
            table = enc.dequantize(np.arange(256, dtype=np.uint8).view(codes.dtype))
            self._table = cached = (enc, codes.dtype, table)
        return np.take(cached[2], codes.view(np.uint8))

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
            "step_sqnr_db": () if self.step_sums is None else _sqnr_per_step(*self.step_sums),
        }


@dataclass
class BatchStats:
    """One batch of one layer, measured (:meth:`LayerAccumulator.measure`): its counters, the
    four power sums (``None`` without a float reference) and the LSB error's maximum, count of
    nonzero errors and histogram (``None`` when the batch is empty)."""

    counters: dict[str, int]
    encoding_text: str
    elements: int
    sums: tuple[float, float, float, float] | None = None
    lsb: tuple[int, int, np.ndarray] | None = None
    steps: tuple[np.ndarray, np.ndarray] | None = None  # per time step: Σ ref², Σ err²


def _step_sums(deq: np.ndarray, ref: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Σ ref² and Σ (deq - ref)² over every axis but ``axis``, in float64."""
    ref64 = np.moveaxis(ref, axis, 0).reshape(ref.shape[axis], -1).astype(np.float64)
    err = np.moveaxis(deq, axis, 0).reshape(ref.shape[axis], -1).astype(np.float64) - ref64
    return (ref64 * ref64).sum(axis=1), (err * err).sum(axis=1)


def _sqnr_per_step(ref_sq: np.ndarray, err_sq: np.ndarray) -> tuple[float, ...]:
    """``10 log10(Σ ref² / Σ err²)`` per step (inf where exact, -inf where the reference is 0)."""
    out = []
    for r, e in zip(ref_sq.tolist(), err_sq.tolist(), strict=True):
        out.append(math.inf if e == 0.0 else (-math.inf if r == 0.0 else 10.0 * math.log10(r / e)))
    return tuple(out)


def _lsb_stats(lsb: np.ndarray) -> tuple[int, int, np.ndarray] | None:
    """``(max |error|, nonzero errors, histogram)`` of one batch's LSB errors."""
    if lsb.size == 0:
        return None
    hist = np.zeros(2 * HIST_RANGE + 1, np.int64)
    low, high = int(lsb.min()), int(lsb.max())
    off = int(np.count_nonzero(lsb))
    hist[HIST_RANGE] = lsb.size - off
    first, last = max(low, -HIST_RANGE), min(high, HIST_RANGE)
    # One comparison per occurring nonzero bin, tails folded into the end bins: at most 16
    # cheap passes over small integers, faster than bincount's int64 conversion.
    for value in range(first, last + 1):
        if value == -HIST_RANGE:
            hist[0] += int(np.count_nonzero(lsb <= value))
        elif value == HIST_RANGE:
            hist[-1] += int(np.count_nonzero(lsb >= value))
        elif value != 0:
            hist[value + HIST_RANGE] += int(np.count_nonzero(lsb == value))
    if high < -HIST_RANGE:
        hist[0] += lsb.size  # every element is in the low tail (the loop ran no bin)
    elif low > HIST_RANGE:
        hist[-1] += lsb.size
    return max(-low, high), off, hist


def top1(logits: np.ndarray) -> np.ndarray:
    """Predicted class per sample: argmax over the last axis of ``(N, classes)`` outputs."""
    logits = np.asarray(logits)
    return logits.reshape(logits.shape[0], -1).argmax(axis=1)


def _power_sums(deq: np.ndarray, reference: np.ndarray) -> tuple[float, float, float, float]:
    """``(Σ ref², Σ deq², Σ deq·ref, Σ (deq - ref)²)`` from float32 dot products, or in float64
    where float32 could be wrong (module docstring)."""
    ref = np.asarray(reference)
    if ref.dtype == np.float32 and deq.dtype == np.float32 and deq.size:
        d, r = deq.reshape(-1), ref.reshape(-1)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            err = d - r
            nonzero_err = bool(err.any())
            sums = [_dot32(r, r), _dot32(d, d), _dot32(d, r), _dot32(err, err)]
        # float32 trouble shows as a non-finite sum, or a zero error power for a nonzero error
        # (squares below float32's range); both are rare and get the float64 sums.
        if all(math.isfinite(v) for v in sums) and (sums[3] > 0.0) == nonzero_err:
            return sums[0], sums[1], sums[2], sums[3]
    r64 = np.asarray(reference, dtype=np.float64)
    d64 = deq.astype(np.float64)
    e64 = d64 - r64
    return (
        float(np.sum(r64 * r64)),
        float(np.sum(d64 * d64)),
        float(np.sum(d64 * r64)),
        float(np.sum(e64 * e64)),
    )


def _lsb_error(codes: np.ndarray, ideal: np.ndarray, enc) -> np.ndarray:
    """``enc.lsb_index(codes) - enc.lsb_index(ideal)``, as int16 where it fits.

    ``lsb_index`` maps each code to its position independently of the others, so for 8-bit
    codes it is a 256-entry table; a linear encoding's index is the code itself.
    """
    if codes.dtype.itemsize == 1 and ideal.dtype == codes.dtype:
        if type(enc).lsb_index is LinearEncoding.lsb_index:
            return np.subtract(codes, ideal, dtype=np.int16)
        table = enc.lsb_index(np.arange(256, dtype=np.uint8).view(codes.dtype))
        if np.all(np.abs(table) < 2**14):
            table = table.astype(np.int16)
            return np.take(table, codes.view(np.uint8)) - np.take(table, ideal.view(np.uint8))
    return enc.lsb_index(codes) - enc.lsb_index(ideal)


_ROW = 1024  # float32 dot products over rows this long, the rows summed in float64


def _dot32(a: np.ndarray, b: np.ndarray) -> float:
    """``Σ a·b`` of float32 vectors: a float32 BLAS dot per row of :data:`_ROW` elements (about
    1e-7 relative error), the row results summed in float64; one pass, no temporaries."""
    rows = a.size // _ROW
    split = rows * _ROW
    total = 0.0
    if rows:
        per_row = np.matmul(a[:split].reshape(rows, 1, _ROW), b[:split].reshape(rows, _ROW, 1))
        total = float(per_row.sum(dtype=np.float64))
    if split < a.size:
        total += float(np.dot(a[split:], b[split:]))
    return total
