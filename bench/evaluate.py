"""``prog.evaluate`` on the demo, samples per second per backend, against onnxruntime's float32.

Run: ``python bench/evaluate.py [--samples 5000] [--rounds 5] [--backend xs3]`` (with quantemu
installed, or ``PYTHONPATH=src``; needs onnxruntime, from the test extra).

Each backend's program is compiled once on the demo's calibration split; ``--samples`` test
samples (the 360-sample split repeated) are then evaluated with ``prog.evaluate(x, labels)``: the
float model with every intermediate, the integer program, and every layer's statistics, batches
side by side on the cores. The baseline is onnxruntime running the float32 model over the same
samples in the same process, in interleaved blocks (``_timing.compare``); the ratio is taken per
round and reported as the median with its spread. Issue 17's target is absolute: at least
10,000 samples/s per backend at default threads.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import compare, machine_record, onnxruntime_session
from quantemu.backends.registry import known_backends
from quantemu.data import demo_dataset, demo_model_path
from quantemu.intmath import parallel

TARGET = 10_000  # samples/s, issue 17


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000, help="samples (default 5000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--backend", action="append", choices=known_backends(), help="only these (repeatable)"
    )
    parser.add_argument("--threads", type=int, help="limit onnxruntime and quantemu threads")
    args = parser.parse_args(argv)

    import quantemu  # noqa: PLC0415 (keeps --help light)

    for line in machine_record():
        print(line)
    x, labels = demo_dataset("test")
    x = np.resize(x, (args.samples, *x.shape[1:])).astype(np.float32)
    labels = np.resize(labels, args.samples)
    calib = demo_dataset("calib")[0]
    session = onnxruntime_session(demo_model_path(), args.threads)
    name = session.get_inputs()[0].name
    print(f"demo CNN, {args.samples} samples, {args.rounds} interleaved rounds")
    worst = 0.0
    with parallel.limit_threads(args.threads):
        print(f"quantemu threads: {parallel.threads()}")
        for backend in args.backend or ("xs3", "nvdla", "onednn", "nnie", "tflite"):
            program = quantemu.compile(demo_model_path(), backend, calib=calib)
            c = compare(
                [lambda p=program: p.evaluate(x, labels), lambda: session.run(None, {name: x})],
                args.rounds,
                min_calls=1,
                names=(backend, "onnxruntime"),
            )
            rate = args.samples / c.median_time(0)
            verdict = "met" if rate >= TARGET else "not met"
            print(
                f"{backend:>7}: evaluate {rate:8,.0f} samples/s  onnxruntime float32 "
                f"{args.samples / c.median_time(1):10,.0f} samples/s  {c.summary()}  "
                f"target >= {TARGET:,}/s: {verdict}"
            )
            worst = max(worst, TARGET / rate)
    print(f"worst target / rate: {worst:.2f} ({'all' if worst <= 1 else 'some'} targets met)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
