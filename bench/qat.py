"""Quantization-aware training on the demo: samples per second per backend, against float
training of the same network.

Run: ``python bench/qat.py [--rounds 3] [--epochs 2] [--backend nvdla]`` (needs torch:
``pip install 'quantemu[torch]'``).

For each backend, ``quantemu.torch.prepare(demo, backend, calib)`` is trained for ``--epochs``
epochs over the 256 calibration images (Adam, batch 64): every step lowers the graph with the
new weights, runs the backend's exact program and back-propagates through the float twin. The
baseline is the same module trained in plain float (``QatModel.float_forward``: the twin alone,
no quantization), the same steps, in the same process; the two alternate in interleaved rounds
(``_timing.compare``) and the ratio is taken per round (median and spread). Issue 18's target:
at least 200 samples/s of QAT here.
"""

from __future__ import annotations

import argparse

from _timing import compare, machine_record
from quantemu.backends.registry import known_backends

TARGET = 200  # samples/s, issue 18


def _epochs(qat, forward, x, y, epochs: int):
    import torch  # noqa: PLC0415 (an optional dependency, needed here only)

    optimizer = torch.optim.Adam(qat.parameters(), lr=1e-4)
    for _ in range(epochs):
        for start in range(0, len(x), 64):
            loss = torch.nn.functional.cross_entropy(
                forward(x[start : start + 64]), y[start : start + 64]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per timed call")
    parser.add_argument(
        "--backend", action="append", choices=known_backends(), help="only these (repeatable)"
    )
    args = parser.parse_args(argv)

    import torch  # noqa: PLC0415

    import quantemu.torch as qt  # noqa: PLC0415
    from quantemu.data import demo_dataset, demo_model_path  # noqa: PLC0415

    for line in machine_record():
        print(line)
    x_calib, y_calib = demo_dataset("calib")
    x, y = torch.from_numpy(x_calib), torch.from_numpy(y_calib).long()
    samples = args.epochs * len(x)
    print(f"demo CNN, {args.epochs} epochs x {len(x)} images per call, batch 64, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads)")  # fmt: skip
    worst = 0.0
    for backend in args.backend or ("xs3", "nvdla", "onednn", "nnie", "tflite"):
        qat = qt.prepare(demo_model_path(), backend, x_calib)
        c = compare(
            [
                lambda q=qat: _epochs(q, q, x, y, args.epochs),
                lambda q=qat: _epochs(q, q.float_forward, x, y, args.epochs),
            ],
            args.rounds,
            min_calls=1,
            names=(backend, "float"),
        )
        rate = samples / c.median_time(0)
        verdict = "met" if rate >= TARGET else "not met"
        print(
            f"{backend:>7}: QAT {rate:7,.0f} samples/s  float training "
            f"{samples / c.median_time(1):8,.0f} samples/s  {c.summary()}  "
            f"target >= {TARGET}/s: {verdict}"
        )
        worst = max(worst, TARGET / rate)
    print(f"worst target / rate: {worst:.2f} ({'all' if worst <= 1 else 'some'} targets met)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
