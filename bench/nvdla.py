"""NVDLA backend throughput, as ratios to plain NumPy baselines of comparable work.

Run: ``python bench/nvdla.py`` (with quantemu installed, or ``PYTHONPATH=src``).

* ``sdp+lut``: 10**6 int32 elements through BS (bias add with operand shift), BN (multiply and
  truncate), EW with the hybrid LUT programmed for a sigmoid, and the output converter, with
  every counter. Baseline: the same dataflow in float64 NumPy (add, multiply, ``np.interp`` over
  257 entries, scale, round, clip).
* ``pdp_avg``: 3x3 average pooling (stride 1, pad 1) of a [64, 128, 128] int8 cube. Baseline:
  the 9-tap float sum over the padded cube, scaled and rounded.
* ``cacc``: 32 partial-sum steps for 10**6 INT16 lanes in 48 bits. Baseline: ``sum`` over the
  steps plus a shift and clip.

Timings come from interleaved blocks with the baseline in the same run (``_timing.compare``);
printed as the median over rounds of quantemu time / baseline time, with its spread (1.0 = as
fast as NumPy doing the same arithmetic in floats, without the exact rounding, saturation order
and counters). The target is <= 10 for every row.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import machine_record, paired
from quantemu.backends.nvdla import CaccRegisters, SdpRegisters, cacc, pdp_avg, sdp
from quantemu.backends.nvdla.lut_program import sigmoid_lut
from quantemu.backends.nvdla.quantize import program_pdp

TARGET = 10.0


def _sdp_case(n: int, rng):
    x = rng.integers(-(1 << 20), 1 << 20, n, dtype=np.int64).astype(np.int32)
    prog, _ = sigmoid_lut(in_scale=256)
    regs = SdpRegisters(
        OUT_PRECISION=0,
        BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=2, BS_ALU_OPERAND=1234, BS_ALU_SHIFT_VALUE=3,
        BN_BYPASS=0, BN_MUL_BYPASS=0, BN_MUL_OPERAND=3, BN_MUL_SHIFT_VALUE=5,
        EW_BYPASS=0, EW_LUT_BYPASS=0, CVT_SCALE=255, CVT_SHIFT=15,
        **prog.fields,
    )  # fmt: skip
    xs = np.linspace(-8, 8, 257)
    table = 1 / (1 + np.exp(-xs))
    xf = x.astype(np.float64)

    def run():
        sdp(x, regs, lut_le=prog.le, lut_lo=prog.lo)

    def base():
        v = (xf + 1234 * 8) * 3 / 32
        y = np.interp(v / 256, xs, table) * 255
        np.clip(np.rint(y), -128, 127)

    return run, base


def _pdp_case(rng):
    x = rng.integers(-128, 128, (64, 128, 128), dtype=np.int64).astype(np.int8)
    regs = program_pdp((64, 128, 128), (3, 3), pads=(1, 1, 1, 1))
    xf = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)))

    def base():
        s = sum(xf[:, i : i + 128, j : j + 128] for i in range(3) for j in range(3))
        np.rint(s / 9)

    return (lambda: pdp_avg(x, regs)), base


def _cacc_case(n: int, rng):
    p = rng.integers(-(1 << 30), 1 << 30, (32, n), dtype=np.int64)
    regs = CaccRegisters(PROC_PRECISION=1, CLIP_TRUNCATE=8)

    def base():
        np.clip(np.right_shift(p.sum(axis=0), 8), -(1 << 31), (1 << 31) - 1)

    return (lambda: cacc(p, regs)), base


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10**6)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = [
        ("sdp+lut", *_sdp_case(args.size, rng)),
        ("pdp_avg", *_pdp_case(rng)),
        ("cacc", *_cacc_case(args.size, rng)),
    ]
    worst = 0.0
    for line in machine_record():
        print(line)
    print(f"{'case':<10} {'quantemu ms':>12} {'numpy ms':>10}  median paired ratio")
    for name, fn, base in rows:
        c = paired(fn, base, args.rounds)
        worst = max(worst, c.ratio())
        tf, tb = c.median_time(0), c.median_time(1)
        print(f"{name:<10} {tf * 1e3:12.1f} {tb * 1e3:10.1f}  {c.summary()}")
    print(f"worst ratio {worst:.2f} (target <= {TARGET})")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
