"""Whole-model bit-exact simulation on each backend, as a ratio to onnxruntime's float32 time.

Run: ``python bench/simulate.py`` (with quantemu installed, or ``PYTHONPATH=src``; needs
onnxruntime, from the test extra).

The model is :func:`quantemu.graph.zoo.resnet18` (224x224, batch 1, random weights, batch norms
after every conv). It is calibrated once on a few random inputs, then compiled for each backend
(``quantemu.compile``: parameter derivation and operator choice; timed and reported separately,
not part of the ratio) and simulated with ``program.run(x)``, the integer program only. The
baseline is onnxruntime running the float32 model on the same input in the same process; the
two are measured alternately, best of N. The target is a ratio <= 5 for xs3, nvdla and onednn
(issue 8); nnie is reported without a target. A backend whose lowering is not there yet, or
that cannot lower the model, is skipped with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

from _timing import paired_best_of
from quantemu.backends.registry import known_backends
from quantemu.errors import QuantemuError
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18
from quantemu.intmath import parallel

TARGET = 5.0
TARGETED = ("xs3", "nvdla", "onednn")


def _session(model, threads: int | None):
    import onnxruntime  # noqa: PLC0415 (a test-extra dependency, needed here only)

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _blas_threads(n: int | None):
    if n is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 (optional)
    except ImportError:
        print("(threadpoolctl is not installed: NumPy's BLAS keeps its default threads)")
        return contextlib.nullcontext()
    return threadpool_limits(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--calib", type=int, default=4, help="calibration samples (default 4)")
    parser.add_argument(
        "--backend", action="append", choices=known_backends(), help="only these (repeatable)"
    )
    parser.add_argument(
        "--threads", type=int, help="limit onnxruntime, BLAS and quantemu.intmath threads"
    )
    args = parser.parse_args()

    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps start-up light)
    from quantemu.simulate import compile_model  # noqa: PLC0415

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
        f"{time.perf_counter() - t0:.1f} s; best of {args.repeat}"
    )
    session = _session(model, args.threads)
    worst = 0.0
    with _blas_threads(args.threads), parallel.limit_threads(args.threads):
        for backend in args.backend or known_backends():
            try:
                t0 = time.perf_counter()
                program = compile_model(graph, backend, None, calibration=ranges)
                compile_s = time.perf_counter() - t0
                program.run(x)  # warm-up, and errors before timing
            except QuantemuError as exc:
                print(f"{backend:>7}: skipped: {exc}")
                continue
            t_sim, t_ort = paired_best_of(
                lambda p=program: p.run(x),
                lambda: session.run(None, {"input": x}),
                args.repeat,
            )
            ratio = t_sim / t_ort
            if backend in TARGETED:
                worst = max(worst, ratio)
            verdict = (
                ("meets" if ratio <= TARGET else "misses") + f" <= {TARGET:g}"
                if backend in TARGETED
                else "no target"
            )
            print(
                f"{backend:>7}: compile {compile_s:6.2f} s  simulate {t_sim * 1e3:8.1f} ms  "
                f"onnxruntime {t_ort * 1e3:6.1f} ms  ratio {ratio:6.2f}  ({verdict})"
            )
    print(f"worst ratio of {', '.join(TARGETED)}: {worst:.2f} (target <= {TARGET:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
