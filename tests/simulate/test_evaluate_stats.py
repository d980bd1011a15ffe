"""The fast per-layer statistics (:mod:`quantemu.simulate.metrics`) against the obvious ones.

``evaluate`` sums in float32 per batch, dequantizes 8-bit codes through a table and puts only
small integer differences on the LSB grid. Here every statistic is recomputed the slow, plain
way (float64, whole arrays, ``lsb_index`` on every code, ``bincount``) on a small evaluation of
the demo for every backend. Tolerances: SQNR within 1e-3 dB and cosine within 1e-6 (reported
to 0.1 dB and 4 decimals; the float32 sums are good to about 1e-7 relative); element counts,
LSB statistics, histograms, counters and accuracies exactly equal.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.intmath import parallel
from quantemu.program import LinearEncoding, QTensor
from quantemu.simulate.metrics import HIST_RANGE, LayerAccumulator, top1

BACKENDS = ["xs3", "nvdla", "onednn", "nnie", "tflite"]
SQNR_TOL_DB = 1e-3
COSINE_TOL = 1e-6


def _slow_layer(pairs) -> dict:
    """Statistics of one layer from ``(QTensor, float reference)`` batches, in float64."""
    sums = dict.fromkeys(("rr", "dd", "dr", "ee"), 0.0)
    hist = np.zeros(2 * HIST_RANGE + 1, np.int64)
    elements = max_lsb = off = 0
    for tensor, reference in pairs:
        ref = np.asarray(reference, np.float64)
        deq = tensor.dequantize().astype(np.float64)
        sums["rr"] += float(np.sum(ref * ref))
        sums["dd"] += float(np.sum(deq * deq))
        sums["dr"] += float(np.sum(deq * ref))
        sums["ee"] += float(np.sum((deq - ref) ** 2))
        enc = tensor.encoding
        lsb = enc.lsb_index(tensor.codes) - enc.lsb_index(enc.quantize(reference))
        elements += lsb.size
        max_lsb = max(max_lsb, int(np.abs(lsb).max()))
        off += int(np.count_nonzero(lsb))
        hist += np.bincount((np.clip(lsb, -HIST_RANGE, HIST_RANGE) + HIST_RANGE).ravel(), None, 17)
    sqnr = math.inf if sums["ee"] == 0 else 10 * math.log10(sums["rr"] / sums["ee"])
    cosine = sums["dr"] / math.sqrt(sums["rr"] * sums["dd"])
    return {"elements": elements, "sqnr_db": sqnr, "cosine": cosine, "max_abs_lsb": max_lsb,
            "fraction_off": off / elements, "lsb_histogram": tuple(hist.tolist())}  # fmt: skip


def _slow_evaluation(prog, x, y, batch_size):
    per_layer = {layer.name: [] for layer in prog.lowered.layers}
    counters = {layer.name: Counter() for layer in prog.lowered.layers}
    float_pred, backend_pred = [], []
    out = prog.graph.outputs[0]
    for start in range(0, len(x), batch_size):
        batch = x[start : start + batch_size]
        ref = prog.graph.run_float(prog.float_input(batch), intermediates=True)
        result = prog.run(batch, keep="all")
        for layer in prog.lowered.layers:
            per_layer[layer.name].append((result.tensors[layer.output], ref[layer.output]))
            counters[layer.name].update({k: int(v) for k, v in result.counters[layer.name].items()})
        float_pred.append(top1(ref[out]))
        backend_pred.append(top1(result.outputs[out]))
    stats = {name: _slow_layer(pairs) for name, pairs in per_layer.items()}
    f, b = np.concatenate(float_pred), np.concatenate(backend_pred)
    accuracies = (float(np.mean(f == y)), float(np.mean(b == y)), float(np.mean(f == b)))
    return stats, counters, accuracies


@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_statistics_match_the_float64_formulas(backend):
    x, y = demo_dataset("test")
    x, y = x[:96], y[:96]
    prog = quantemu.compile(demo_model_path(), backend=backend, calib=demo_dataset("calib")[0])
    fast = prog.evaluate(x, y, batch_size=40)  # 40 + 40 + 16: a short last batch too
    slow, counters, accuracies = _slow_evaluation(prog, x, y, 40)
    assert (fast.float_accuracy, fast.backend_accuracy, fast.agreement) == accuracies
    for layer in fast.layers:
        want = slow[layer.name]
        got = {key: getattr(layer, key) for key in want}
        assert got["sqnr_db"] == pytest.approx(want.pop("sqnr_db"), abs=SQNR_TOL_DB), layer.name
        assert got["cosine"] == pytest.approx(want.pop("cosine"), abs=COSINE_TOL), layer.name
        assert {k: got[k] for k in want} == want, layer.name
        assert dict(layer.counters) == dict(counters[layer.name]), layer.name


def _accumulate(codes, reference, encoding) -> dict:
    acc = LayerAccumulator()
    acc.update(QTensor(codes, encoding), reference, {})
    return acc.finish()


def _check_against_slow(codes, reference, encoding) -> None:
    got = _accumulate(codes, reference, encoding)
    want = _slow_layer([(QTensor(codes, encoding), reference)])
    assert got["sqnr_db"] == pytest.approx(want.pop("sqnr_db"), rel=1e-6, abs=SQNR_TOL_DB)
    assert got["cosine"] == pytest.approx(want.pop("cosine"), abs=COSINE_TOL)
    assert {k: got[k] for k in want} == {
        k: (list(v) if k == "lsb_histogram" else v) for k, v in want.items()
    }


@pytest.mark.parametrize("shift", [-40, -9, -8, -3, 0, 2, 8, 9, 40])
def test_histogram_tails_and_shifts(shift):
    """Uniform errors of ``shift`` LSBs and mixed ones: bins, folded tails, max and count."""
    rng = np.random.default_rng(abs(shift))
    enc = LinearEncoding(0.05, 3, "int8")
    ref = rng.uniform(-4, 4, size=(3, 5, 7)).astype(np.float32)
    ideal = enc.quantize(ref).astype(np.int16)
    shifted = np.clip(ideal + shift, -128, 127).astype(np.int8)
    _check_against_slow(shifted, ref, enc)
    mixed = np.clip(ideal + rng.integers(-12, 13, ideal.shape), -128, 127).astype(np.int8)
    _check_against_slow(mixed, ref, enc)


def test_wide_codes_and_per_channel_encodings_take_the_general_path():
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(4, 3, 5)).astype(np.float32)
    wide = LinearEncoding(0.001, -7, "int16")
    _check_against_slow(wide.quantize(ref) + np.int16(2), ref, wide)
    per_channel = LinearEncoding(np.array([0.01, 0.02, 0.04]), np.array([0, 1, -2]), "uint8", 1)
    codes = per_channel.quantize(ref)
    codes[0, 1, 2] += 1
    _check_against_slow(codes, ref, per_channel)


def test_float32_trouble_falls_back_to_float64():
    """Errors too small to square in float32 still give a finite SQNR; huge values, whose
    float32 squares overflow, still give the float64 numbers."""
    enc = LinearEncoding(1e-30, 0, "int8")
    codes = np.array([[3, -2, 5]], np.int8)
    deq = enc.dequantize(codes)
    ref = np.nextafter(deq, np.float32(1))  # one float32 ulp (about 1e-37) away
    got = _accumulate(codes, ref, enc)
    assert math.isfinite(got["sqnr_db"])
    _check_against_slow(codes, ref, enc)
    huge = LinearEncoding(1e30, 0, "int8")
    big = np.array([[100, -90, 7]], np.int8)
    _check_against_slow(big, huge.dequantize(big) * np.float32(1.01), huge)


def test_exact_layer_is_infinite_sqnr():
    enc = LinearEncoding(0.25, 0, "int8")
    codes = np.array([[1, 2, -3, 0]], np.int8)
    got = _accumulate(codes, enc.dequantize(codes), enc)
    assert (got["sqnr_db"], got["cosine"], got["max_abs_lsb"]) == (math.inf, 1.0, 0)
    assert got["lsb_histogram"][HIST_RANGE] == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_evaluation_is_the_same_on_any_number_of_threads(backend):
    """Batches measured side by side (one per thread) and added in batch order give the
    evaluation of one thread, field for field (the float sums in the same order)."""
    x, labels = demo_dataset("test")
    program = quantemu.compile(demo_model_path(), backend, calib=demo_dataset("calib")[0])
    seen = []
    with parallel.limit_threads(1):
        one = program.evaluate(x, labels, batch_size=50).to_dict()
    for threads in (2, 3):
        with parallel.limit_threads(threads):
            many = program.evaluate(x, labels, batch_size=50, on_batch=seen.append).to_dict()
        assert many == one
    assert seen == [50] * 7 + [10] + [50] * 7 + [10]  # progress reported in batch order
