"""``prog.evaluate`` on one process against a ``local:N`` Dask cluster: samples per second.

Run: ``python bench/distributed.py [--samples 300] [--workers 2] [--size 64] [--backend xs3]``
(needs ``quantemu[distributed]``).

The model is :func:`quantemu.graph.zoo.resnet18` (random weights, ``--size`` x ``--size``
inputs; 224 for the full-size network). The evaluation set is ``--samples`` random images
written as four ``.npy`` shards, which the cluster's workers read themselves. The same
evaluation runs on this process (its own threads, as ``prog.evaluate`` does) and on a
``LocalCluster`` of ``--workers`` worker processes (one thread each), alternating for
``--rounds`` rounds (``_timing.paired``); both results are checked identical first. The ratio
is the cluster's time over one process's, per round. The overhead per task is measured apart:
the cluster's time for the same number of tasks on one-sample batches of the demo CNN, whose
compute is negligible, divided by the task count.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# This script's folder is on sys.path first (python bench/distributed.py), where its own name
# would shadow Dask's "distributed" package: the folder is taken off, here and so in the worker
# processes (which import this file again), and put back only to import _timing in main().
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="evaluation samples")
    parser.add_argument("--workers", type=int, default=2, help="local:N worker processes")
    parser.add_argument("--size", type=int, default=64, help="input height and width")
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (default 3)")
    parser.add_argument("--backend", default="xs3", help="default xs3")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(HERE))
    try:
        from _timing import machine_record, paired  # noqa: PLC0415
    finally:
        sys.path.remove(str(HERE))
    import quantemu  # noqa: PLC0415 (keeps --help light)
    from quantemu.data import demo_dataset, demo_model_path  # noqa: PLC0415
    from quantemu.graph.zoo import resnet18  # noqa: PLC0415
    from quantemu.simulate.cluster import cluster  # noqa: PLC0415

    for line in machine_record():
        print(line)
    rng = np.random.default_rng(0)
    shape = (3, args.size, args.size)
    model = quantemu.load_onnx(resnet18(batch="N", size=args.size))
    calib = rng.standard_normal((8, *shape)).astype(np.float32)
    program = quantemu.compile(model, args.backend, calib=calib)
    with tempfile.TemporaryDirectory() as folder, cluster(f"local:{args.workers}") as client:
        cuts = np.linspace(0, args.samples, 5).astype(int)
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            data = rng.standard_normal((b - a, *shape)).astype(np.float32)
            np.save(Path(folder) / f"shard-{i}.npy", data)
        shards = str(Path(folder) / "shard-*.npy")
        one = program.evaluate(shards, batch_size=16).to_dict()
        assert program.evaluate(shards, batch_size=16, client=client).to_dict() == one
        c = paired(
            lambda: program.evaluate(shards, batch_size=16, client=client),
            lambda: program.evaluate(shards, batch_size=16),
            args.rounds,
            min_calls=1,
            warmup=0,
        )
        t_cluster, t_one = c.median_time(0), c.median_time(1)
        print(
            f"ResNet-18 {args.size}x{args.size} on {args.backend}, {args.samples} samples in 4 "
            f"shards, batch 16: one process {args.samples / t_one:7.1f} samples/s, "
            f"local:{args.workers} {args.samples / t_cluster:7.1f} samples/s  "
            f"(time ratio cluster / one process: {c.summary()})"
        )
        demo = quantemu.compile(demo_model_path(), args.backend, calib=demo_dataset("calib")[0])
        x = demo_dataset("test")[0][:64]
        demo.evaluate(x, batch_size=1, client=client)  # the program reaches every worker
        start = time.perf_counter()
        demo.evaluate(x, batch_size=1, client=client)
        tasks = min(64, args.workers * 4)  # measure_on_cluster's tasks for 64 batches
        print(
            f"overhead: {(time.perf_counter() - start) / tasks * 1e3:.1f} ms per task "
            f"({tasks} tasks of one-sample demo batches, compute negligible)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
