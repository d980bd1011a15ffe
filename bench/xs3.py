"""Benchmark: xs3 conv2d_deep against a float64 NumPy im2col + matmul of the same shape.

56x56x64 int8 input, 3x3 window with one pixel of zero-point padding on every side (stride 1,
56x56 output), 64 output channels, BSO from the XMOS converter rules (``xs3.derive_bso``).
Both are timed in the same run in interleaved blocks (``_timing.compare``); the median paired
ratio emulation / baseline is printed with its spread (target <= 3).

    PYTHONPATH=src python bench/xs3.py [--rounds N]
"""

from __future__ import annotations

import argparse

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from _timing import machine_record, paired
from quantemu.backends import xs3

H = W = 56
C_IN = C_OUT = 64
K = 3
ZERO_POINT = -7


def make_case(seed: int = 0):
    """Random int8 input and weights, BSO derived from plausible TFLite scales."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=(H, W, C_IN), dtype=np.int8)
    k = rng.integers(-127, 128, size=(C_OUT, K, K, C_IN), dtype=np.int8)
    derived = xs3.derive_bso(
        input_scale=0.02,
        input_zero_point=ZERO_POINT,
        weight_scales=rng.uniform(0.001, 0.004, C_OUT),
        output_scale=0.5,
        output_zero_point=3,
        weights=k,
        bias=rng.normal(0.0, 1.0, C_OUT),
    )
    params = xs3.ConvParams(ZERO_POINT, xs3.Window(K, K, -1, -1, 1, 1), xs3.YParams(H, W, C_OUT))
    return x, k, derived.bso(), params


def baseline(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """float64 im2col (zero-point padding) + one matmul: what a plain float emulation costs."""
    padded = np.full((H + 2, W + 2, C_IN), ZERO_POINT, dtype=np.float64)
    padded[1:-1, 1:-1] = x
    cols = sliding_window_view(padded, (K, K), axis=(0, 1)).transpose(0, 1, 3, 4, 2)
    cols = np.ascontiguousarray(cols).reshape(H * W, K * K * C_IN)
    return cols @ k.reshape(C_OUT, -1).T.astype(np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    x, k, bso, params = make_case()
    result = xs3.conv2d_deep(x, k, bso, params)  # warm-up, and a sanity check below
    acc_check = baseline(x, k).reshape(H, W, C_OUT).astype(np.int64)
    bias = xs3.unpack_bso(bso, C_OUT).bias
    assert np.array_equal(result.acc, acc_check + bias), "accumulators differ from the baseline"
    c = paired(lambda: xs3.conv2d_deep(x, k, bso, params), lambda: baseline(x, k), args.rounds)
    for line in machine_record():
        print(line)
    print(f"xs3 conv2d_deep {H}x{W}x{C_IN} -> {C_OUT}, {K}x{K}, pad 1")
    print(f"  emulation (bit-exact, host_reference): {c.median_time(0) * 1e3:8.2f} ms")
    print(f"  float64 im2col + matmul baseline:      {c.median_time(1) * 1e3:8.2f} ms")
    print(f"  {c.summary()} (target <= 3x)")
    print(f"  outputs saturated at the int8 rails: {result.output_saturated}")


if __name__ == "__main__":
    main()
