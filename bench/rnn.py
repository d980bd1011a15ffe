"""oneDNN's int8 LSTM emulated on a speech-like model, against onnxruntime's float32 LSTM.

Run: ``python bench/rnn.py [--samples 256] [--steps 50] [--rounds 5]`` (with quantemu
installed, or ``PYTHONPATH=src``; needs torch, to build the model, and onnxruntime: the test
extra).

The model is a PyTorch ``nn.LSTM(16, 64, num_layers=2, batch_first=True)`` with a ``Linear``
head on the last step, exported to ONNX (two ONNX LSTM nodes). quantemu runs it on the onednn
backend at ``--isa avx2`` (pair-saturating GEMMs) and ``avx512_core_vnni`` (exact): per layer
and time step, the u8·s8 GEMMs, the JIT logistic/tanh polynomials with their FMAs and the u8
re-quantization of the state. The baseline is onnxruntime running the float32 model over the
same samples in the same process, in interleaved blocks (``_timing.compare``); the ratio is the
median per-round ratio with its spread. The time loop is sequential (each step needs the last
state); every step is vectorised over the batch and the hidden units.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from _timing import compare, machine_record, onnxruntime_session


def _export(folder: Path, steps: int) -> Path:
    import torch  # noqa: PLC0415 (an optional dependency)

    torch.manual_seed(0)

    class Speech(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(16, 64, num_layers=2, batch_first=True)
            self.fc = torch.nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])

    path = folder / "speech.onnx"
    torch.onnx.export(Speech().eval(), torch.randn(1, steps, 16), str(path), dynamo=False,
                      input_names=["x"], output_names=["logits"], opset_version=14)  # fmt: skip
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256, help="sequences (default 256)")
    parser.add_argument("--steps", type=int, default=50, help="time steps (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = parser.parse_args(argv)

    import quantemu  # noqa: PLC0415 (keeps --help light)

    for line in machine_record():
        print(line)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((args.samples, args.steps, 16)) * 0.5).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        model = _export(Path(folder), args.steps)
        session = onnxruntime_session(model, None)
        name = session.get_inputs()[0].name
        print(f"2-layer LSTM (16 -> 64), {args.steps} steps, {args.samples} sequences, "
              f"{args.rounds} interleaved rounds")  # fmt: skip
        for isa in ("avx2", "avx512_core_vnni"):
            program = quantemu.compile(str(model), "onednn", calib=x[:64], isa=isa)
            c = compare(
                [lambda p=program: p.run(x), lambda: session.run(None, {name: x[:1]})],
                args.rounds,
                min_calls=1,
                names=(isa, "onnxruntime"),
            )
            per_seq = c.median_time(0) / args.samples * 1e3
            print(f"{isa:>17}: {per_seq:.3f} ms per sequence "
                  f"({args.samples / c.median_time(0):,.0f} sequences/s)")  # fmt: skip
            ort = c.median_time(1) * 1e3
            print(f"{'onnxruntime':>17}: {ort:.3f} ms per sequence (float32, batch 1: the exported "
                  f"model's fixed batch); ratio per sequence {per_seq / ort:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
