"""Throughput of NNIE ``log_quantize`` as a ratio to ``np.log2`` on the same array, same run.

Usage: ``PYTHONPATH=src python bench/nnie.py [--elements N] [--rounds R]``. The input is 4M
float32 values, Gaussian (sigma 1) with a quarter of them zeroed (ReLU-like), clip 3.7. The
four functions run in interleaved blocks for R rounds (``_timing.compare``); ratios are paired
per round, reported as the median with its spread. The target is a ratio of at most 4.

Caveat printed with the result: ``np.log2`` on float32 has a SIMD fast path that NumPy takes
only when no element is zero, negative or special; on this signed array it takes the slow
loop. The ratio to ``np.log2`` on a same-size positive array is printed as well.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import compare, machine_record
from quantemu.backends.nnie import log_dequantize, log_quantize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=4 << 20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.elements).astype(np.float32)
    x[rng.random(args.elements) < 0.25] = 0.0
    clip = 3.7
    codes, _ = log_quantize(x, clip)  # warm the per-clip tables
    positive = np.abs(x) + np.float32(1.0)  # same size, no zero/negative/special values
    with np.errstate(divide="ignore", invalid="ignore"):
        c = compare(
            [
                lambda: log_quantize(x, clip),
                lambda: np.log2(x),
                lambda: np.log2(positive),
                lambda: log_dequantize(codes, clip),
            ],
            args.rounds,
        )
    t_quant, t_log2, t_log2_fast, t_deq = (c.median_time(i) for i in range(4))
    n = args.elements / 1e6
    for line in machine_record():
        print(line)
    print(f"elements: {args.elements} float32, clip {clip}, median per-call times")
    print(f"np.log2 (float32):      {t_log2 * 1e3:8.2f} ms  {n / t_log2:8.1f} M elem/s")
    print(f"log_quantize (codes+y): {t_quant * 1e3:8.2f} ms  {n / t_quant:8.1f} M elem/s")
    print(f"log_dequantize:         {t_deq * 1e3:8.2f} ms  {n / t_deq:8.1f} M elem/s")
    print(f"log_quantize / np.log2: {c.summary(1)} (target <= 4)")
    # NumPy's SIMD float32 log2 is only used when no element gives -inf or NaN; on the signed
    # array above it falls back to a slower loop. For honesty, the ratio to that fast path too:
    print(
        f"for reference, np.log2 on positive values only (SIMD fast path): "
        f"{t_log2_fast * 1e3:.2f} ms; log_quantize / that: {c.summary(2)}"
    )


if __name__ == "__main__":
    main()
