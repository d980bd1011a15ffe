"""Quantization-aware training against NVDLA's exact arithmetic, against float fake-quant QAT.

Run: ``python examples/qat_nvdla.py [--seeds 4] [--epochs 3]`` (``pip install 'quantemu[torch]'``).

**The case.** The bundled digits CNN, reparametrized without changing its float function: one
channel of the stem convolution is scaled up 30x and every consumer scales it back down (the
depthwise filter of that channel by 1/30; the pointwise output channel, whose sum with the stem
output forms the residual, by 30x; the next convolution's input channel by 1/30). ReLU is
positive-homogeneous, so the float model classifies exactly as before. Channels whose ranges
differ by this much are common in real networks (the problem cross-layer equalization, Nagel
et al. 2019, was made for); here one channel now sets the per-tensor range of three activations.

**Post-training quantization on NVDLA** (``quantemu.compile(model, "nvdla", calib)``): NVDLA's
compiler quantizes activations symmetrically per tensor (``scale = max|x| / 127``), so the 15
other channels keep about 1/30 of the grid, and top-1 drops 2.5 points on the test split.

**QAT against NVDLA** (``quantemu.torch.prepare(model, "nvdla", calib)``): a few epochs on the
256 calibration images, the forward pass NVDLA's own integer pipeline for the current weights.

**Float fake-quant QAT** (what MQBench, torch.ao and the like do): the same network, budget and
ranges, with ``torch.fake_quantize_per_tensor_affine`` on every activation (asymmetric uint8 over
the calibrated range, as torch.ao's default observers) and per-channel symmetric int8 weights.

Both trained models are exported (``QatModel.export``) and measured by quantemu on NVDLA, as
``quantemu run trained.onnx --backend nvdla`` would; each number is the mean over ``--seeds``
training seeds (the shuffling and initial state), on the 360 held-out test images.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import quantemu
import quantemu.torch as qt
from quantemu.data import demo_dataset, demo_model_path
from quantemu.torch import ops

CHANNEL, ALPHA = 3, 30.0  # the stem channel scaled up, and by how much
BACKEND = "nvdla"


def imbalanced_model(path: Path) -> Path:
    """The demo model with stem channel ``CHANNEL`` scaled by ``ALPHA`` (float-equivalent)."""
    model = onnx.load(str(demo_model_path()))
    tensors = {t.name: t for t in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "Conv"]
    stem, depthwise, pointwise, conv = nodes  # the demo's four convolutions, in graph order

    def scale(name: str, factor: float, axis: int) -> None:
        value = numpy_helper.to_array(tensors[name]).astype(np.float64)
        index = [slice(None)] * value.ndim
        index[axis] = CHANNEL
        value[tuple(index)] *= factor
        tensors[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))

    for node in (stem, pointwise):  # output channel: weight row and bias
        scale(node.input[1], ALPHA, 0)
        scale(node.input[2], ALPHA, 0)
    scale(depthwise.input[1], 1 / ALPHA, 0)  # its filter reads the scaled channel
    scale(conv.input[1], 1 / ALPHA, 1)  # input channel of the next convolution
    onnx.save(model, str(path))
    return path


def fake_quant_forward(qat: qt.QatModel, x: torch.Tensor) -> torch.Tensor:
    """The float twin with linear fake quantization: per-channel symmetric int8 weights, and
    asymmetric uint8 activations over each tensor's calibrated range."""
    values = {qat.graph.inputs[0].name: x}
    for node in qat.graph.nodes:
        args = [_argument(qat, name, values) if name else None for name in node.inputs]
        out = ops.kernel(node)(node.attrs, args)
        rng = qat.ranges.tensors.get(node.outputs[0])
        if rng is not None and rng.axis is None:
            low, high = min(rng.min, 0.0), max(rng.max, 0.0)
            step = max(high - low, 1e-8) / 255
            out = torch.fake_quantize_per_tensor_affine(out, step, round(-low / step), 0, 255)
        values[node.outputs[0]] = out
    return values[qat.graph.outputs[0]]


def _argument(qat: qt.QatModel, name: str, values: dict) -> torch.Tensor:
    if name in values:
        return values[name]
    if name in qat.weight_names:
        w = qat.weight(name)
        if w.dim() < 2:
            return w  # biases stay float (int32 on the targets)
        step = w.detach().abs().amax(dim=tuple(range(1, w.dim()))).clamp_min(1e-8) / 127
        zero = torch.zeros_like(step, dtype=torch.int32)
        return torch.fake_quantize_per_channel_affine(w, step, zero, 0, -127, 127)
    return qat._constants[name]


def train(qat: qt.QatModel, forward, x, y, *, epochs: int, seed: int) -> None:
    """Adam (lr 3e-4), batch 32, seeded shuffling."""
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(qat.parameters(), lr=3e-4)
    order = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for batch in torch.randperm(len(x), generator=order).split(32):
            loss = torch.nn.functional.cross_entropy(forward(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def measured(qat: qt.QatModel, folder: Path, name: str, x_test, y_test) -> float:
    """Top-1 on NVDLA of the exported model, as ``quantemu run`` computes it."""
    path = folder / f"{name}.onnx"
    qat.export(path)
    return quantemu.compile(str(path), BACKEND).evaluate(x_test, y_test).backend_accuracy


def run(seeds: int, epochs: int, folder: Path) -> dict[str, float]:
    """The four accuracies (float, PTQ, QAT against NVDLA, fake-quant QAT), means over seeds."""
    x_test, y_test = demo_dataset("test")
    x_calib, y_calib = demo_dataset("calib")
    model = imbalanced_model(folder / "imbalanced.onnx")
    ptq = quantemu.compile(str(model), BACKEND, calib=x_calib).evaluate(x_test, y_test)
    x, y = torch.from_numpy(x_calib), torch.from_numpy(y_calib).long()
    exact, fake = [], []
    for seed in range(seeds):
        qat = qt.prepare(str(model), BACKEND, x_calib)
        train(qat, qat, x, y, epochs=epochs, seed=seed)
        exact.append(measured(qat, folder, f"exact_{seed}", x_test, y_test))
        twin = qt.prepare(str(model), BACKEND, x_calib)
        train(twin, lambda xb, m=twin: fake_quant_forward(m, xb), x, y, epochs=epochs, seed=seed)
        fake.append(measured(twin, folder, f"fake_{seed}", x_test, y_test))
    return {
        "float": ptq.float_accuracy,
        "ptq": ptq.backend_accuracy,
        "qat_exact": float(np.mean(exact)),
        "qat_fake_quant": float(np.mean(fake)),
        "qat_exact_runs": exact,
        "qat_fake_quant_runs": fake,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="training seeds (default 4)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs over 256 images")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        r = run(args.seeds, args.epochs, Path(folder))
    loss = r["float"] - r["ptq"]
    print(f"digits CNN, stem channel {CHANNEL} scaled {ALPHA:g}x (float-equivalent), on NVDLA")
    print(f"  float model              {100 * r['float']:6.2f} %")
    print(f"  post-training quantized  {100 * r['ptq']:6.2f} %  (loses {100 * loss:.2f} points)")
    for key, label in (("qat_exact", "QAT against NVDLA"), ("qat_fake_quant", "fake-quant QAT")):
        won = (r[key] - r["ptq"]) / loss if loss > 0 else float("nan")
        runs = ", ".join(f"{100 * a:.2f}" for a in r[f"{key}_runs"])
        print(f"  {label:<23}  {100 * r[key]:6.2f} %  (wins back {100 * won:.0f} %; runs {runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
