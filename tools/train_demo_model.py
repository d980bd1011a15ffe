"""Train quantemu's built-in demo model and write it into ``src/quantemu/data``.

The model is a small CNN for scikit-learn's 8x8 digits (1797 images, 10 classes): a 3x3 conv,
a depthwise 3x3 + pointwise 1x1 block with a residual add, max pooling, a second 3x3 conv,
average pooling and a dense layer; every conv is followed by batch normalization (which
quantemu's ``fold_batchnorm`` pass folds). Inputs are the 0..16 pixel values divided by 16,
shaped ``(N, 1, 8, 8)``.

Writes ``digits_cnn.onnx`` (TorchScript exporter, opset 13, symbolic batch), ``digits_test.npz``
(the held-out test split: ``x`` uint8 pixels 0..16 ``(N, 1, 8, 8)``, ``y`` int64 labels),
``digits_calib.npz`` (a calibration subset of the training split, same layout) and
``digits_cnn.json`` (provenance and the float accuracy that quantemu's executor, onnxruntime and
PyTorch reach on the test split).

Reproducible: fixed seeds, one thread, deterministic algorithms. Needs ``torch==2.13.0`` (CPU),
``scikit-learn``, ``onnx`` and ``onnxruntime``::

    python tools/train_demo_model.py            # writes src/quantemu/data/
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import sklearn
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # run from a checkout without installing

from quantemu.graph import load_onnx  # noqa: E402

OUT = ROOT / "src" / "quantemu" / "data"
SEED = 0
EPOCHS = 60
TEST_FRACTION = 0.2
CALIB_SAMPLES = 256
OPSET = 13


def load_split():
    """The seeded, stratified train/test split of the digits, as uint8 ``(N, 1, 8, 8)``."""
    digits = load_digits()
    x = digits.images.astype(np.uint8).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=TEST_FRACTION, random_state=SEED, stratify=y)


def build_model():
    """The CNN (see the module docstring)."""

    class DigitsCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(1, 16, 3, padding=1, bias=False)
            self.stem_bn = nn.BatchNorm2d(16)
            self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
            self.depthwise_bn = nn.BatchNorm2d(16)
            self.pointwise = nn.Conv2d(16, 16, 1, bias=False)
            self.pointwise_bn = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.conv = nn.Conv2d(16, 32, 3, padding=1, bias=False)
            self.conv_bn = nn.BatchNorm2d(32)
            self.avgpool = nn.AvgPool2d(2)
            self.fc = nn.Linear(32 * 2 * 2, 10)

        def forward(self, x):
            y = torch.relu(self.stem_bn(self.stem(x)))
            z = torch.relu(self.depthwise_bn(self.depthwise(y)))
            z = self.pointwise_bn(self.pointwise(z))
            y = torch.relu(z + y)
            y = self.pool(y)
            y = torch.relu(self.conv_bn(self.conv(y)))
            y = torch.flatten(self.avgpool(y), 1)
            return self.fc(y)

    return DigitsCNN()


def train(x_train: np.ndarray, y_train: np.ndarray):
    """Adam, batch 64, seeded shuffling; returns the model in eval mode."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, EPOCHS)
    xs = torch.from_numpy(x_train.astype(np.float32) / 16)
    ys = torch.from_numpy(y_train)
    generator = torch.Generator().manual_seed(SEED)
    for _epoch in range(EPOCHS):
        model.train()
        for batch in torch.randperm(len(xs), generator=generator).split(64):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[batch]), ys[batch])
            loss.backward()
            optimizer.step()
        scheduler.step()
    return model.eval()


def export(model, path: Path) -> None:
    """TorchScript exporter (``dynamo=False``), opset 13, symbolic batch."""
    dummy = torch.zeros(1, 1, 8, 8)
    torch.onnx.export(
        model,
        (dummy,),
        str(path),
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=OPSET,
        dynamo=False,
        do_constant_folding=True,
        training=torch.onnx.TrainingMode.EVAL,
    )


def accuracies(model, path: Path, x_test: np.ndarray, y_test: np.ndarray) -> dict:
    """Correct counts on the test split: quantemu's executor, onnxruntime, PyTorch."""
    x = x_test.astype(np.float32) / 16
    graph = load_onnx(path)
    ours = graph.run_float(x)["logits"].argmax(axis=1)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"input": x})[0].argmax(axis=1)
    with torch.no_grad():
        reference = model(torch.from_numpy(x)).numpy().argmax(axis=1)
    return {
        name: int((pred == y_test).sum())
        for name, pred in (("quantemu", ours), ("onnxruntime", theirs), ("torch", reference))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    args = parser.parse_args(argv)
    x_train, x_test, y_train, y_test = load_split()
    model = train(x_train, y_train)
    args.out.mkdir(parents=True, exist_ok=True)
    onnx_path = args.out / "digits_cnn.onnx"
    export(model, onnx_path)
    calib = np.random.default_rng(SEED).choice(len(x_train), CALIB_SAMPLES, replace=False)
    np.savez_compressed(args.out / "digits_test.npz", x=x_test, y=y_test)
    np.savez_compressed(args.out / "digits_calib.npz", x=x_train[calib], y=y_train[calib])
    correct = accuracies(model, onnx_path, x_test, y_test)
    record = {
        "model": "digits_cnn.onnx",
        "task": "scikit-learn load_digits (8x8, 10 classes)",
        "input": {"name": "input", "shape": ["batch", 1, 8, 8], "normalization": "pixels / 16"},
        "test_split": {"file": "digits_test.npz", "samples": len(y_test)},
        "calibration_split": {"file": "digits_calib.npz", "samples": CALIB_SAMPLES},
        "float_accuracy": correct["quantemu"] / len(y_test),
        "correct": correct,
        "training": {
            "seed": SEED,
            "epochs": EPOCHS,
            "optimizer": "Adam lr 3e-3 wd 1e-4, cosine",
            "test_fraction": TEST_FRACTION,
            "split": "train_test_split stratified",
        },
        "export": {"exporter": "torch.onnx.export(dynamo=False)", "opset": OPSET},
        "versions": {"torch": torch.__version__, "scikit-learn": sklearn.__version__},
        "sha256": hashlib.sha256(onnx_path.read_bytes()).hexdigest(),
        "tool": "tools/train_demo_model.py",
    }
    (args.out / "digits_cnn.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["correct"]), f"float accuracy {record['float_accuracy']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
