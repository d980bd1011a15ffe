"""The float reference executor on a ResNet-18-shaped model, as a ratio to onnxruntime.

Run: ``python bench/frontend.py`` (with quantemu installed, or ``PYTHONPATH=src``; needs
onnxruntime, from the test extra).

The model is :func:`quantemu.graph.zoo.resnet18` (224x224, batch 1, random weights, batch norms
after every conv). quantemu runs it after its default pass pipeline (batch norms folded,
activations fused); onnxruntime runs it with its default graph optimizations, which do the same.
Both run in the same process on the same input, alternately, best of N. The ratio is quantemu's
time / onnxruntime's time (1.0 = as fast); the target is <= 3.

Each measurement is made twice: with every core (each library's default thread pool) and with
one thread (``--threads 1``, via threadpoolctl for NumPy's BLAS when it is installed), which is
steadier on a loaded machine.
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np

from _timing import paired_best_of
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18

TARGET = 3.0


def _blas_threads(n: int | None):
    if n is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 (optional)
    except ImportError:
        return None
    return threadpool_limits(n)


def _session(model, threads: int | None):
    import onnxruntime  # noqa: PLC0415 (a test-extra dependency, needed here only)

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="best of N (default 10)")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    args = parser.parse_args()

    model = resnet18(size=args.size)
    graph = optimize(load_onnx(model))
    x = np.random.default_rng(0).standard_normal((1, 3, args.size, args.size)).astype(np.float32)
    print(
        f"ResNet-18 shape, {args.size}x{args.size}, batch 1: {len(graph.nodes)} nodes after "
        f"the default passes; best of {args.repeat}"
    )
    worst = 0.0
    for label, threads in (("all cores", None), ("1 thread", 1)):
        limits = _blas_threads(threads)
        if limits is None:
            print(f"{label:>10}: skipped (pip install threadpoolctl to limit BLAS threads)")
            continue
        session = _session(model, threads)
        with limits:
            ours = graph.run_float(x)["logits"]
            (theirs,) = session.run(None, {"input": x})
            np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3)
            t_ours, t_ort = paired_best_of(
                lambda: graph.run_float(x),
                lambda s=session: s.run(None, {"input": x}),
                args.repeat,
            )
        ratio = t_ours / t_ort
        worst = max(worst, ratio)
        print(
            f"{label:>10}: quantemu {t_ours * 1e3:7.1f} ms  onnxruntime {t_ort * 1e3:7.1f} ms"
            f"  ratio {ratio:.2f}"
        )
    verdict = "meets" if worst <= TARGET else "misses"
    print(f"worst ratio {worst:.2f}: {verdict} the target (<= {TARGET:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
