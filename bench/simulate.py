"""Whole-model bit-exact simulation on each backend, as a ratio to onnxruntime's float32 time.

Run: ``python bench/simulate.py [--quick] [--batch 16]`` (with quantemu installed, or
``PYTHONPATH=src``; needs onnxruntime, from the test extra).

The model is :func:`quantemu.graph.zoo.resnet18` (224x224, batch 1, random weights, batch norms
after every conv). It is calibrated once on a few random inputs, then compiled for each backend
(``quantemu.compile``: parameter derivation and operator choice; timed and reported separately,
not part of the ratio) and simulated with ``program.run(x)``, the integer program only. The
baseline is onnxruntime running the float32 model on the same input in the same process.

Timing (``_timing.compare``): the two run in interleaved blocks (each block at least 3 calls and
0.3 s of one engine, its first call untimed), for R rounds; the ratio is quantemu / onnxruntime
within each round, reported as the median over rounds with its interquartile range and min-max.
Issue 17's targets, at default threads: <= 2.0x for xs3, nvdla, onednn (vnni) and nnie; <= 5x
for onednn ``isa=avx2``; with ``--batch 16``, batch 16 costs <= 16.5x batch 1, and the peak
memory of a process that runs batch 16 is <= 1.5x that of one running onnxruntime on it (each
measured in a fresh subprocess: peak RSS after two runs of the batch, the process's own
``VmHWM``, since on Linux ``ru_maxrss`` starts at the forking parent's RSS; the quantemu process
compiles first, as a user's does). A backend that cannot lower the model is
skipped with the reason. The top lines record the machine, its thread
settings and the BLAS kernel, on which every number depends.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from _timing import Comparison, blas_threads, compare, machine_record, onnxruntime_session
from quantemu.backends.registry import known_backends
from quantemu.errors import QuantemuError
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18
from quantemu.intmath import parallel

# (label, backend, lowering options, target ratio to onnxruntime fp32 or None)
VARIANTS = (
    ("xs3", "xs3", {}, 2.0),
    ("nvdla", "nvdla", {}, 2.0),
    ("onednn", "onednn", {}, 2.0),
    ("onednn avx2", "onednn", {"isa": "avx2"}, 5.0),
    ("nnie", "nnie", {}, 2.0),
    ("tflite", "tflite", {}, None),
)
BATCH_SLACK = 16.5 / 16  # issue 17: batch 16 at most 16.5x batch 1
MEMORY_TARGET = 1.5  # issue 17: peak memory at batch 16 at most 1.5x onnxruntime's

# A fresh process: peak RSS (KiB) after running the batch twice, on onnxruntime or a backend.
MEMORY_CHILD = """
import json, resource, sys
import numpy as np
from quantemu.graph.zoo import resnet18
engine, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
options = json.loads(sys.argv[4])
rng = np.random.default_rng(0)
model = resnet18(batch="N", size=size)
x = rng.standard_normal((n, 3, size, size)).astype(np.float32)
if engine == "onnxruntime":
    import onnxruntime
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    run = lambda: session.run(None, {"input": x})
else:
    from quantemu.calibration.api import calibrate
    from quantemu.graph import load_onnx, optimize
    from quantemu.simulate import compile_model
    graph = optimize(load_onnx(model))
    calib = rng.standard_normal((4, 3, size, size)).astype(np.float32)
    program = compile_model(graph, engine, None, calibration=calibrate(graph, calib), **options)
    run = lambda: program.run(x)
run()
run()
try:  # this process's own peak: ru_maxrss starts at the forking parent's RSS (Linux)
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_kib": peak}))
"""


def _session(model, threads: int | None):
    session = onnxruntime_session(model, threads)
    import onnxruntime  # noqa: PLC0415 (a test-extra dependency, needed here only)

    print(
        f"onnxruntime {onnxruntime.__version__}: intra_op threads "
        f"{threads if threads is not None else 'default (physical cores)'}"
    )
    return session


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 rounds")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--calib", type=int, default=4, help="calibration samples (default 4)")
    parser.add_argument(
        "--backend", action="append", choices=known_backends(), help="only these (repeatable)"
    )
    parser.add_argument(
        "--threads", type=int, help="limit onnxruntime, BLAS and quantemu.intmath threads"
    )
    parser.add_argument(
        "--batch", type=int, help="also time batch N against batch 1 (issue 17: N=16)"
    )
    return parser


def _verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return "no target"
    return f"target <= {target:g}x: {'met' if ratio <= target else 'not met'}"


def _report(label: str, compile_s: float, c: Comparison, target: float | None) -> None:
    print(
        f"{label:>11}: compile {compile_s:5.1f} s  sim {c.median_time(0) * 1e3:7.1f} ms  "
        f"ort {c.median_time(1) * 1e3:5.1f} ms  {c.summary()}  {_verdict(c.ratio(), target)}"
    )


def _batch_report(label: str, program, x: np.ndarray, n: int, rounds: int) -> float:
    xb = np.repeat(x, n, axis=0)
    program.run(xb)  # warm-up: first-touch of the larger temporaries is not the steady state
    c = compare([lambda: program.run(xb), lambda: program.run(x)], rounds)
    target = n * BATCH_SLACK
    print(
        f"{label:>11}: batch {n} {c.median_time(0) * 1e3:8.1f} ms vs batch 1 "
        f"{c.median_time(1) * 1e3:6.1f} ms  {c.summary()}  {_verdict(c.ratio(), target)}"
    )
    return c.ratio() / target


def _peak_mib(engine: str, n: int, size: int, options: dict) -> float:
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, engine, str(n), str(size), json.dumps(options)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_kib"] / 1024


def _memory_report(args) -> float:
    """Peak memory at ``--batch``, each engine in a fresh process; the worst ratio / target."""
    n = args.batch
    baseline = _peak_mib("onnxruntime", n, args.size, {})
    print(f"peak memory at batch {n}, fresh processes: onnxruntime {baseline:.0f} MiB")
    worst = 0.0
    for label, backend, options, _ in VARIANTS:
        if args.backend and backend not in args.backend:
            continue
        peak = _peak_mib(backend, n, args.size, options)
        ratio = peak / baseline
        print(
            f"{label:>11}: peak {peak:6.0f} MiB  ratio {ratio:5.2f}x onnxruntime's  "
            f"{_verdict(ratio, MEMORY_TARGET)}"
        )
        worst = max(worst, ratio / MEMORY_TARGET)
    return worst


def _run_variants(args, graph, ranges, session, x) -> float:
    from quantemu.simulate import compile_model  # noqa: PLC0415 (keeps start-up light)

    worst = 0.0
    compiled = []
    for label, backend, options, target in VARIANTS:
        if args.backend and backend not in args.backend:
            continue
        try:
            t0 = time.perf_counter()
            program = compile_model(graph, backend, None, calibration=ranges, **options)
            compile_s = time.perf_counter() - t0
            program.run(x)  # warm-up, and errors before timing
        except QuantemuError as exc:
            print(f"{label:>11}: skipped: {exc}")
            continue
        c = compare(
            [lambda p=program: p.run(x), lambda: session.run(None, {"input": x})],
            args.rounds,
            names=(label, "onnxruntime"),
        )
        _report(label, compile_s, c, target)
        if target is not None:
            worst = max(worst, c.ratio() / target)
        compiled.append((label, program))
    if args.batch:
        print(f"batch {args.batch} vs batch 1, same program (paired per round):")
        for label, program in compiled:
            worst = max(worst, _batch_report(label, program, x, args.batch, args.rounds))
    return worst


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.rounds = 3

    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps start-up light)

    for line in machine_record():
        print(line)
    print(f"quantemu.intmath threads: {args.threads or parallel.threads()}")
    model = resnet18(size=args.size)
    graph = optimize(load_onnx(model))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, args.size, args.size)).astype(np.float32)
    calib = rng.standard_normal((args.calib, 3, args.size, args.size)).astype(np.float32)
    t0 = time.perf_counter()
    ranges = calibrate(graph, calib, batch_size=1)
    print(
        f"ResNet-18 shape, {args.size}x{args.size}, batch 1: {len(graph.nodes)} nodes after the "
        f"default passes; calibrated on {args.calib} random samples in "
        f"{time.perf_counter() - t0:.1f} s; {args.rounds} interleaved rounds"
    )
    session = _session(model, args.threads)
    with blas_threads(args.threads) as how, parallel.limit_threads(args.threads):
        if args.threads is not None:
            print(f"BLAS limited to {args.threads} thread(s) via {how}")
        worst = _run_variants(args, graph, ranges, session, x)
    if args.batch:
        worst = max(worst, _memory_report(args))
    if worst:
        verdict = "all targets met" if worst <= 1 else "some targets not met"
        print(f"worst ratio / target: {worst:.2f} ({verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
