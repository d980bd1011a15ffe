"""Fingerprint every backend and lowering variant on the demo model, to prove a refactor
changed no number.

For each (backend, options) variant the built-in digits CNN is compiled on its calibration split
and run on its test split. The script records two SHA-256 digests per variant:

- ``json``: the ``quantemu run --json`` document of ``prog.evaluate`` (no timing fields exist in
  it; the quantemu version is blanked so that a version bump is not a difference);
- ``codes``: every layer's integer codes (dtype, shape and bytes), every counter and the
  header of one ``prog.run`` over the whole test split.

    python tools/fingerprint.py --out before.json     # record
    python tools/fingerprint.py --check before.json   # compare; exit 1 on any difference
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.graph.zoo import resnet18
from quantemu.report import to_json

VARIANTS: list[tuple[str, dict]] = [
    ("xs3", {}),
    ("xs3", {"model": "device"}),
    ("xs3", {"toolchain": "tflite2xcore"}),
    ("xs3", {"toolchain": "tflite2xcore", "model": "device"}),
    ("xs3", {"toolchain": "tflite2xcore", "symmetric_saturation": True}),
    ("xs3", {"toolchain": "tflite2xcore", "activation_clamp": True}),
    ("tflite", {}),
    ("tflite", {"runtime": "tflite_micro"}),
    ("nvdla", {}),
    ("nvdla", {"weights": "per_filter"}),
    ("nvdla", {"rescale": "bs_mul"}),
    ("nvdla", {"scale_split": "exact"}),
    ("onednn", {}),
    ("onednn", {"isa": "avx2"}),
    ("onednn", {"isa": "avx512_core"}),
    ("onednn", {"reduce_range": True}),
    ("onednn", {"fallback": "float", "threads": 2}),
    ("nnie", {}),
    ("nnie", {"grouped_conv": "log"}),
    ("nnie", {"layer_inputs": "shared"}),
]


def _digest_codes(result) -> str:
    h = hashlib.sha256()
    for name in sorted(result.tensors):
        codes = np.ascontiguousarray(result.tensors[name].codes)
        h.update(f"{name}|{codes.dtype}|{codes.shape}|".encode())
        h.update(codes.tobytes())
    h.update(json.dumps({k: dict(v) for k, v in result.counters.items()}, sort_keys=True).encode())
    return h.hexdigest()


def _cases():
    demo = quantemu.load_onnx(demo_model_path())
    calib = demo_dataset("calib")[0]
    x, labels = demo_dataset("test")
    for backend, options in VARIANTS:
        key = backend + "".join(f" {k}={v}" for k, v in options.items())
        yield key, demo, backend, options, calib, x, labels
    # A narrow ResNet-18 adds residual Adds, MaxPool, global pooling and a Gemm.
    resnet = quantemu.load_onnx(resnet18(batch="N", size=64, width=16, num_classes=10))
    data = np.random.default_rng(0).normal(0, 1, (8, 3, 64, 64)).astype(np.float32)
    for backend in ("xs3", "nvdla", "onednn", "nnie", "tflite"):
        yield f"resnet18 {backend}", resnet, backend, {}, data, data, None


def fingerprint() -> dict[str, dict[str, str]]:
    out = {}
    for key, graph, backend, options, calib, x, labels in _cases():
        prog = quantemu.compile(graph, backend, calib, **options)
        document = to_json([prog.evaluate(x, labels)], model="demo")
        document["quantemu"] = ""
        for ev in document["evaluations"]:
            ev.get("header", {}).pop("quantemu", None)
        text = json.dumps(document, indent=1, sort_keys=True)
        codes = _digest_codes(prog.run(x, keep="all"))  # every layer, not just the outputs
        header = json.dumps(prog.header, sort_keys=True)
        out[key] = {
            "json": hashlib.sha256(text.encode()).hexdigest(),
            "codes": hashlib.sha256((codes + header).encode()).hexdigest(),
        }
        print(f"{key:45s} {out[key]['json'][:12]} {out[key]['codes'][:12]}", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the fingerprints to this file")
    group.add_argument("--check", help="compare with fingerprints written by --out")
    args = parser.parse_args()
    prints = fingerprint()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(prints, f, indent=1, sort_keys=True)
        return 0
    with open(args.check, encoding="utf-8") as f:
        before = json.load(f)
    bad = [k for k in sorted(set(before) | set(prints)) if before.get(k) != prints.get(k)]
    for key in bad:
        print(f"DIFFERS: {key}: {before.get(key)} -> {prints.get(key)}")
    print(f"{len(prints) - len(bad)}/{len(prints)} variants identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
