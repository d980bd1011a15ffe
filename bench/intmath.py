"""Throughput of the quantemu.intmath primitives, as ratios to a plain NumPy baseline.

Run: ``python bench/intmath.py`` (with quantemu installed, or ``PYTHONPATH=src``).

Each primitive runs on 10**6-element arrays with realistic values (int32-range accumulators,
16-bit scales, float activations) and is timed in interleaved blocks with a plain NumPy
baseline of the same size in the same run (``_timing.compare``: the ratio is taken per round,
the median over rounds is printed, and the min-max of the main ratio). Ratios (baseline time /
primitive time; 1.0 = as fast as the baseline) are printed rather than absolute times: this is
about relative cost on whatever machine runs it. The target is >= 0.3 for every primitive.

Baselines: the one plain NumPy operation each primitive cannot do without, on the same operands
and with the same output type. ``np.right_shift(x, 7)`` for the rounding shifts, saturation and
wrapping; ``np.multiply`` (to int64) for the fixed-point multiplies; NumPy's own conversion to
int64, ``x.astype(np.int64)``, for the float conversions (they read floats and write int64).
The "1 pass" column is the ratio to a single NumPy pass over the first operand, whatever the
primitive: ``np.right_shift(x, 7)`` for integers, ``np.rint(x)`` for floats (which writes
floats: half the bytes of an int64 result for float32).

The primitives split large arrays across threads (:mod:`quantemu.intmath.parallel`; the
baselines are single-threaded NumPy calls). The "1 thread" column repeats each measurement with
``limit_threads(1)``: the cost of the NumPy passes alone.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import compare, machine_record, paired
from quantemu import intmath as im
from quantemu.intmath import parallel

TARGET = 0.3


def _cases(size: int, shift: int, seed: int) -> list[tuple]:
    """``(name, primitive, baseline name, baseline, one NumPy pass over the first operand)``."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**31), 2**31, size=size, dtype=np.int64)  # int32-ish accumulators
    b = rng.integers(-(2**15), 2**15, size=size, dtype=np.int64)  # 16-bit multipliers
    x32, b16 = x.astype(np.int32), b.astype(np.int16)  # the same values in their storage types
    f32 = (rng.standard_normal(size) * 100).astype(np.float32)  # activations; some saturate s8
    f64 = rng.standard_normal(size) * 1e4
    shift_name = f"np.right_shift(x, {shift})"

    def shifted():
        return np.right_shift(x, shift)

    def rounding(name):
        f = getattr(im, name)
        return lambda: f(x, shift)

    integer = [
        (f"{name}(x, {shift})", rounding(name))
        for name in (
            "shift_right_round_half_up",
            "shift_right_round_half_down",
            "shift_right_round_half_away",
            "shift_right_round_half_even",
            "shift_right_floor",
            "shift_right_toward_zero",
        )
    ]
    integer += [
        ("saturate(x, 16)", lambda: im.saturate(x, 16)),
        ("saturate_symmetric(x, 16)", lambda: im.saturate_symmetric(x, 16)),
        ("saturate_count(x, 16)", lambda: im.saturate_count(x, 16)),
        ("wrap(x, 16)", lambda: im.wrap(x, 16)),
    ]
    cases = [(name, fn, shift_name, shifted, shifted) for name, fn in integer]
    cases += [
        (
            "multiply_shift_right_round_half_up(x, b, 14)",
            lambda: im.multiply_shift_right_round_half_up(x, b, 14),
            "np.multiply(x, b)",
            lambda: np.multiply(x, b),
            shifted,
        ),
        (
            "multiply_shift_right_round_half_up(x:i32, b:i16, 14)",
            lambda: im.multiply_shift_right_round_half_up(x32, b16, 14),
            "np.multiply(x, b, dtype=int64)",
            lambda: np.multiply(x32, b16, dtype=np.int64),
            shifted,
        ),
        (
            "float32_to_int_round_half_even_saturate(x32, 8)",
            lambda: im.float32_to_int_round_half_even_saturate(f32, 8),
            "x32.astype(np.int64)",
            lambda: f32.astype(np.int64),
            lambda: np.rint(f32),
        ),
        (
            "float64_to_int_round_half_away_add_truncate(x64)",
            lambda: im.float64_to_int_round_half_away_add_truncate(f64),
            "x64.astype(np.int64)",
            lambda: f64.astype(np.int64),
            lambda: np.rint(f64),
        ),
    ]
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10**6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shift", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="run the primitives whose name contains this")
    args = parser.parse_args(argv)
    cases = [case for case in _cases(args.size, args.shift, args.seed) if args.only in case[0]]
    for line in machine_record():
        print(line)
    print(
        f"quantemu.intmath, {args.size} elements, {args.rounds} interleaved rounds, ratio = "
        f"baseline time / primitive time (target >= {TARGET}); {parallel.threads()} thread(s)"
    )
    print(
        f"{'primitive':<52} {'baseline':<30} {'ratio':>6} {'min-max':>11} {'1 thread':>9} "
        f"{'1 pass':>7}"
    )
    below = []
    for name, fn, base_name, base, one_pass in cases:
        c = compare([fn, base, one_pass], args.rounds)
        with parallel.limit_threads(1):
            c1 = paired(fn, base, args.rounds)
        # baseline / primitive: the inverse of the paired ratio; the median commutes with 1/x
        ratio, ratio1, pass_ratio = 1 / c.ratio(1), 1 / c1.ratio(), 1 / c.ratio(2)
        lo, hi = (1 / r for r in reversed(c.spread(1)))
        flag = "" if ratio >= TARGET else "  < target"
        print(
            f"{name:<52} {base_name:<30} {ratio:6.2f} {lo:5.2f}-{hi:<5.2f} {ratio1:9.2f} "
            f"{pass_ratio:7.2f}{flag}"
        )
        if ratio < TARGET:
            below.append(name)
    if below:
        print(f"below target: {', '.join(below)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
