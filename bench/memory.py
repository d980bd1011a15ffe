"""Peak memory of ``program.run`` on 10^3 to 10^5 demo samples, against its own baseline.

Run: ``python bench/memory.py [--backend xs3] [--sizes 1000 10000 100000]``.

Each measurement is a fresh subprocess (peak RSS, ``ru_maxrss``, never goes down within a
process): it compiles the demo model, builds N samples, records its peak RSS, then runs
``program.run(x)`` (``keep="outputs"``, the default: batches, only the outputs kept) and
records the peak again. The input itself (N x 64 float32) is part of both. Printed per N: the
baseline peak, the peak after the run, the growth, and the growth per 1,000 samples; bounded
memory shows as a growth that stays about one batch's working set plus the outputs
(N x 10 int8 codes and float32 values), not a growth proportional to every layer's tensors.
The ratio column is the peak after the run over the baseline measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys
import numpy as np
import quantemu
from quantemu.data import demo_dataset, demo_model_path
backend, n = sys.argv[1], int(sys.argv[2])
x, *_ = demo_dataset()
program = quantemu.compile(demo_model_path(), backend, calib=x[:64])
data = np.resize(x, (n, *x.shape[1:])).astype(np.float32)
program.run(data[:8])  # warm: caches and lazily built plans are not the run's growth
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = program.run(data)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"base_kib": base, "peak_kib": peak, "outputs": len(result.tensors)}))
"""


def measure(backend: str, n: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, backend, str(n)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", default="xs3")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    args = parser.parse_args(argv)
    print(f"backend {args.backend}: peak RSS of program.run(x), keep='outputs'")
    print(f"{'samples':>9} {'base MiB':>9} {'peak MiB':>9} {'growth MiB':>11} {'ratio':>6}")
    for n in args.sizes:
        m = measure(args.backend, n)
        base, peak = m["base_kib"] / 1024, m["peak_kib"] / 1024
        print(f"{n:>9,} {base:>9.1f} {peak:>9.1f} {peak - base:>11.1f} {peak / base:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
