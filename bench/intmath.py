"""Throughput of the quantemu.intmath primitives, as ratios to a plain NumPy baseline.

Run: ``python bench/intmath.py`` (with quantemu installed, or ``PYTHONPATH=src``).

Each primitive runs on 10**6-element arrays with realistic values (int32-range accumulators,
16-bit scales, float activations) and is timed best-of-N, interleaved with a NumPy baseline of
the same size in the same run: ``np.right_shift(x, 7)`` for the integer primitives and
``np.rint`` on the same float array for the conversions. Ratios (baseline time / primitive
time; 1.0 = as fast as the baseline) are printed rather than absolute times: this is about
relative cost on whatever machine runs it. The target is >= 0.3 for every primitive.

The conversions return int64 from a float32/float64 input, so they also show the ratio to
``np.rint(x).astype(np.int64)`` (NumPy's own route to the same output type), for context.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import best_of, paired_best_of
from quantemu import intmath as im

TARGET = 0.3


def _cases(size: int, shift: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**31), 2**31, size=size, dtype=np.int64)  # int32-ish accumulators
    b = rng.integers(-(2**15), 2**15, size=size, dtype=np.int64)  # 16-bit multipliers
    x32, b16 = x.astype(np.int32), b.astype(np.int16)  # the same values in their storage types
    f32 = (rng.standard_normal(size) * 100).astype(np.float32)  # activations; some saturate s8
    f64 = rng.standard_normal(size) * 1e4
    int_base = (f"np.right_shift(x, {shift})", lambda: np.right_shift(x, shift))
    f32_base = ("np.rint(x32)", lambda: np.rint(f32))
    f64_base = ("np.rint(x64)", lambda: np.rint(f64))

    def shifted(name):
        f = getattr(im, name)
        return lambda: f(x, shift)

    cases = [
        (name, shifted(name), int_base)
        for name in (
            "shift_right_round_half_up",
            "shift_right_round_half_down",
            "shift_right_round_half_away",
            "shift_right_round_half_even",
            "shift_right_floor",
            "shift_right_toward_zero",
        )
    ]
    cases += [
        ("saturate(x, 16)", lambda: im.saturate(x, 16), int_base),
        ("saturate_symmetric(x, 16)", lambda: im.saturate_symmetric(x, 16), int_base),
        ("saturate_count(x, 16)", lambda: im.saturate_count(x, 16), int_base),
        ("wrap(x, 16)", lambda: im.wrap(x, 16), int_base),
        (
            "multiply_shift_right_round_half_up(x, b, 14)",
            lambda: im.multiply_shift_right_round_half_up(x, b, 14),
            int_base,
        ),
        (
            "multiply_shift_right_round_half_up(x:i32, b:i16, 14)",
            lambda: im.multiply_shift_right_round_half_up(x32, b16, 14),
            int_base,
        ),
        (
            "float32_to_int_round_half_even_saturate(x32, 8)",
            lambda: im.float32_to_int_round_half_even_saturate(f32, 8),
            f32_base,
        ),
        (
            "float64_to_int_round_half_away_add_truncate(x64)",
            lambda: im.float64_to_int_round_half_away_add_truncate(f64),
            f64_base,
        ),
    ]
    context = {
        "float32_to_int_round_half_even_saturate(x32, 8)": lambda: np.rint(f32).astype(np.int64),
        "float64_to_int_round_half_away_add_truncate(x64)": lambda: np.rint(f64).astype(np.int64),
    }
    return cases, context


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10**6)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--shift", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="run the primitives whose name contains this")
    args = parser.parse_args(argv)
    cases, context = _cases(args.size, args.shift, args.seed)
    cases = [case for case in cases if args.only in case[0]]
    print(
        f"quantemu.intmath, {args.size} elements, best of {args.repeat}, ratio = baseline time "
        f"/ primitive time (target >= {TARGET})"
    )
    print(f"{'primitive':<52} {'baseline':<22} {'ratio':>6}  {'vs rint+astype':>14}")
    below = []
    for name, fn, (base_name, base) in cases:
        tf, tb = paired_best_of(fn, base, args.repeat)
        ratio = tb / tf
        extra = ""
        if name in context:
            tc = best_of(context[name], args.repeat)
            extra = f"{tc / tf:14.2f}"
        flag = "" if ratio >= TARGET else "  < target"
        print(f"{name:<52} {base_name:<22} {ratio:6.2f}  {extra}{flag}")
        if ratio < TARGET:
            below.append(name)
    if below:
        print(f"below target: {', '.join(below)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
