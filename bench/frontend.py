"""The float reference executor on a ResNet-18-shaped model, as a ratio to onnxruntime.

Run: ``python bench/frontend.py`` (with quantemu installed, or ``PYTHONPATH=src``; needs
onnxruntime, from the test extra).

The model is :func:`quantemu.graph.zoo.resnet18` (224x224, batch 1, random weights, batch norms
after every conv). quantemu runs it after its default pass pipeline (batch norms folded,
activations fused); onnxruntime runs it with its default graph optimizations, which do the same.
Both run in the same process on the same input, in interleaved blocks (``_timing.compare``).
The ratio is quantemu's time / onnxruntime's time within a round (1.0 = as fast), reported as
the median over rounds with its spread; the target is <= 3.

Each measurement is made twice: with every core (each library's default thread pool) and with
one thread (NumPy's BLAS limited by ``_timing.blas_threads``: threadpoolctl when installed,
else OpenBLAS's own setter), which is steadier on a loaded machine.
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import blas_threads, machine_record, paired
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18

TARGET = 3.0


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
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    args = parser.parse_args()

    model = resnet18(size=args.size)
    graph = optimize(load_onnx(model))
    x = np.random.default_rng(0).standard_normal((1, 3, args.size, args.size)).astype(np.float32)
    for line in machine_record():
        print(line)
    print(
        f"ResNet-18 shape, {args.size}x{args.size}, batch 1: {len(graph.nodes)} nodes after "
        f"the default passes; {args.rounds} interleaved rounds"
    )
    worst = 0.0
    for label, threads in (("all cores", None), ("1 thread", 1)):
        session = _session(model, threads)
        with blas_threads(threads) as how:
            ours = graph.run_float(x)["logits"]
            (theirs,) = session.run(None, {"input": x})
            np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3)
            c = paired(
                lambda: graph.run_float(x),
                lambda s=session: s.run(None, {"input": x}),
                args.rounds,
            )
        worst = max(worst, c.ratio())
        print(
            f"{label:>10}: quantemu {c.median_time(0) * 1e3:7.1f} ms  onnxruntime "
            f"{c.median_time(1) * 1e3:7.1f} ms  {c.summary()}  (BLAS threads: {how})"
        )
    verdict = "meets" if worst <= TARGET else "misses"
    print(f"worst ratio {worst:.2f}: {verdict} the target (<= {TARGET:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
