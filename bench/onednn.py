"""Benchmark: the avx2 (pair-saturating) u8·s8 matmul against a plain float64 NumPy matmul.

Shape 512x4608x256 (M x K x N). Activations are uniform u8; weights are realistic s8 values
(|w| <= 64 mostly, about 1 % large ones), so few weight pairs can saturate VPMADDUBSW and the
order-faithful correction touches only those. Prints the ratio of the emulation's time to a
float64 ``A @ B`` of the same shape on operands already in float64, measured in the same run
in interleaved blocks (``_timing.compare``: median paired ratio and its spread). DESIGN
principle 8 targets a ratio <= 2.

Usage: ``PYTHONPATH=src python bench/onednn.py [--rounds N] [--large-fraction F]``
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import machine_record, paired
from quantemu.backends.onednn import MatmulParams, matmul

M, K, N = 512, 4608, 256


def make_operands(rng: np.random.Generator, large_fraction: float):
    """Uniform u8 activations; normal(0, 20) weights clipped to ±64 with a few large ones."""
    a = rng.integers(0, 256, size=(M, K), dtype=np.uint8)
    w = np.clip(np.round(rng.normal(0.0, 20.0, size=(K, N))), -64, 64)
    large = rng.random((K, N)) < large_fraction
    w[large] = rng.integers(65, 128, size=int(large.sum())) * rng.choice([-1, 1], int(large.sum()))
    return a, w.astype(np.int8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--large-fraction", type=float, default=0.01)
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    a, b = make_operands(rng, args.large_fraction)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    params = MatmulParams("avx2", "u8")
    result = matmul(a, b, params)
    c = paired(lambda: matmul(a, b, params), lambda: af @ bf, args.rounds)
    for line in machine_record():
        print(line)
    print(f"onednn avx2 u8*s8 matmul {M}x{K}x{N}, {args.large_fraction:.1%} large weights")
    print(f"  saturated pair sums: {result.saturated_pairs}")
    print(f"  float64 numpy matmul: {c.median_time(1) * 1e3:8.1f} ms")
    print(f"  emulation (avx2):     {c.median_time(0) * 1e3:8.1f} ms")
    print(f"  {c.summary()} (target <= 2x)")


if __name__ == "__main__":
    main()
