"""``quantemu demo``, the README's first command, as a ratio to onnxruntime's float32 time.

Run: ``python bench/demo.py`` (with quantemu installed, or ``PYTHONPATH=src``; needs onnxruntime,
from the test extra).

The command is timed whole, as a user runs it (``quantemu demo -q``: load the bundled digits CNN,
calibrate, compile and evaluate it on every backend over the 360-sample test split, print the
table). The baseline is onnxruntime running the float32 model over the same test split in the
same process. The two run in interleaved blocks (``_timing.compare``); the ratio is taken per
round and reported as the median with its spread. A demo call lasts seconds, so its blocks are
single calls, none untimed: switching costs are noise at that length, and a user's run pays
its own start-up. The ratio says how much the whole
flow costs against one float pass; the absolute time is reported against the demo's budget
(:data:`BUDGET_S`: the README promises a few seconds, the budget is what may never be exceeded).
"""

from __future__ import annotations

import argparse
import contextlib
import io

from _timing import machine_record, onnxruntime_session, paired
from quantemu.cli import main as quantemu_main
from quantemu.data import demo_dataset, demo_model_path

BUDGET_S = 60.0


def _demo(argv: list[str]) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return quantemu_main(argv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--backend", help="only this backend (default: every backend)")
    parser.add_argument("--threads", type=int, help="limit onnxruntime and quantemu threads")
    args = parser.parse_args()

    argv = ["demo", "-q"]
    if args.backend:
        argv += ["--backend", args.backend]
    if args.threads is not None:
        argv = ["--threads", str(args.threads), *argv]
    code = _demo(argv)  # warm-up (imports, caches), and errors before timing
    if code != 0:
        print(f"quantemu {' '.join(argv)} exited with {code}; nothing timed")
        return 1

    for line in machine_record():
        print(line)
    x, _ = demo_dataset("test")
    session = onnxruntime_session(demo_model_path(), args.threads)
    name = session.get_inputs()[0].name
    c = paired(
        lambda: _demo(argv),
        lambda: session.run(None, {name: x}),
        args.rounds,
        min_calls=1,
        warmup=0,
    )
    t_demo, t_ort = c.median_time(0), c.median_time(1)
    verdict = "within" if t_demo <= BUDGET_S else "over"
    print(f"quantemu {' '.join(argv)}; {len(x)} test samples")
    print(
        f"demo {t_demo:7.2f} s  onnxruntime float32 {t_ort * 1e3:7.2f} ms  "
        f"{c.summary()}  ({verdict} the {BUDGET_S:g} s budget)"
    )
    return 0 if t_demo <= BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
