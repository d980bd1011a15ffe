"""The float side of the ``tests/data/tflite_refs`` models: the Keras model as ONNX and the
representative dataset the converter saw (helper of ``make_tflite_refs.py``; TensorFlow venv
plus tf2onnx, never imported by quantemu).

    /work/tfenv/bin/python tools/tflite_refs_float.py            # the FLOAT_EXPORT models
    /work/tfenv/bin/python tools/tflite_refs_float.py add relu6  # only these

Per model NAME: ``NAME.float.onnx`` (tf2onnx ``from_keras``, opset 13, batch dimension free;
tf2onnx keeps Keras' NHWC input and output and wraps NCHW convolutions and pooling in
Transposes) and ``NAME.calib.npy`` (float32, the 64 samples of ``rep_samples`` stacked on
axis 0). Only these files and the manifest entries ``float_onnx`` / ``calib`` are written: the
model is rebuilt and converted again in memory, and its int8 bytes must equal the manifest's
sha256, so the ONNX holds exactly the weights the int8 file was made from.

A calibration set costs 4 bytes per input element per sample (131 kB for an 8x8x8 input), so
only the models of FLOAT_EXPORT get one (the folder stays small); any other can be exported
by naming it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf2onnx

import make_tflite_refs as mr

OPSET = 13
LAYOUT = (
    "NHWC input and output as in Keras; tf2onnx puts Transposes to NCHW around "
    "Conv / pooling / Concat"
)
# One model per converter rule: per-channel weights and biases (add, conv_scale_spread with its
# bias-driven weight scales and below-1e-6 channels), a constant operand (mul_channel_const),
# calibration on sparse data (conv_channelwise_ot), fixed output scales (logistic), an
# activation with its own output range (leaky_relu), pooling on the input's scale.
FLOAT_EXPORT = (
    "add",
    "conv_scale_spread",
    "conv_channelwise_ot",
    "mul_channel_const",
    "logistic",
    "leaky_relu",
    "maxpool_same",
)


COMMAND = (
    "/work/tfenv/bin/python tools/tflite_refs_float.py (FLOAT_EXPORT models): "
    + __doc__.split("Per model NAME: ")[1].split("\n\nA calibration")[0].replace("\n", " ")
)


def _sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def export_onnx(model, spec) -> bytes:
    sig = [tf.TensorSpec((None, *spec["shape"]), tf.float32, name="input")]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=sig, opset=OPSET)
    return proto.SerializeToString()


def calib_set(spec) -> np.ndarray:
    return np.concatenate([s[0] for s in mr.rep_samples(spec)]).astype(np.float32)


def write_float(model, spec, out: Path) -> dict:
    """Write NAME.float.onnx and NAME.calib.npy; returns their manifest entries."""
    name = spec["name"]
    onnx_blob = export_onnx(model, spec)
    (out / f"{name}.float.onnx").write_bytes(onnx_blob)
    calib = calib_set(spec)
    np.save(out / f"{name}.calib.npy", calib)
    return {
        "float_onnx": {
            "file": f"{name}.float.onnx",
            "exporter": f"tf2onnx {tf2onnx.__version__} convert.from_keras, opset {OPSET}",
            "layout": LAYOUT,
            "input_shape": ["N", *spec["shape"]],
            "sha256": _sha(onnx_blob),
        },
        "calib": {
            "file": f"{name}.calib.npy",
            "what": "the representative dataset the converter saw, stacked (float32)",
            "shape": list(calib.shape),
            "sha256": _sha(calib.tobytes()),
        },
    }


def main(argv: list[str]) -> int:
    specs = {s[0]: dict(zip(mr.SPEC_KEYS, s, strict=True)) for s in mr.SPECS}
    names = argv or list(FLOAT_EXPORT)
    unknown = set(names) - set(specs)
    if unknown:
        raise SystemExit(f"unknown model(s) {sorted(unknown)}")
    path = mr.OUT / "MANIFEST.json"
    manifest = json.loads(path.read_text())
    for name in names:
        print(f"[tflite_refs_float] {name}", file=sys.stderr, flush=True)
        spec = specs[name]
        model = mr.build_keras(spec)
        want = manifest["models"][name]["sha256"]["int8.tflite"]
        if _sha(mr.convert_int8(model, spec)) != want:
            raise SystemExit(f"{name}: the rebuilt int8 model differs from the stored one")
        manifest["models"][name].update(write_float(model, spec, mr.OUT))
    manifest["commands"]["float_onnx"] = COMMAND
    manifest["script"] = mr.SCRIPT
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
