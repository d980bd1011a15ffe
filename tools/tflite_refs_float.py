"""The float side of the ``tests/data/tflite_refs`` models: the Keras model as ONNX and the
representative dataset the converter saw (helper of ``make_tflite_refs.py``; TensorFlow venv
plus tf2onnx, never imported by quantemu).

    /work/tfenv/bin/python tools/tflite_refs_float.py            # the FLOAT_EXPORT models
    /work/tfenv/bin/python tools/tflite_refs_float.py add relu6  # only these

Per model NAME: ``NAME.float.onnx`` (tf2onnx ``from_keras``, opset 13, batch dimension free;
tf2onnx keeps Keras' NHWC input and output and wraps NCHW convolutions and pooling in
Transposes; for the models of ``tflite_refs_tokens.HANDWRITTEN`` instead an onnx.helper graph,
opset 17, with the ops a PyTorch export has, LayerNormalization and HardSigmoid, and the Keras
weights, checked with onnxruntime against the Keras model on the calibration samples within
1e-5) and ``NAME.calib.npy`` (float32, the 64 samples of ``rep_samples`` stacked on axis 0).
Only these files and the manifest entries ``float_onnx`` / ``calib`` are written: the
model is rebuilt and converted again in memory, and its int8 bytes must equal the manifest's
sha256, so the ONNX holds exactly the weights the int8 file was made from.

A calibration set costs 4 bytes per input element per sample (131 kB for an 8x8x8 input), so
only the models of FLOAT_EXPORT get one (the folder stays small); any other can be exported
by naming it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf2onnx

import make_tflite_refs as mr
import tflite_refs_tokens as tok

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
    *tok.HANDWRITTEN,  # ONNX written with onnx.helper as PyTorch exports it (not tf2onnx)
)
# onnxruntime is not in the TensorFlow venv: the hand-written ONNX is checked in quantemu's.
ORT_PYTHON = "/work/main/.venv/bin/python"
ORT_TOL = 1e-5
_ORT_CHECK = (
    "import sys, numpy as np, onnxruntime as ort; d = sys.argv[1]; "
    "s = ort.InferenceSession(d + '/m.onnx', providers=['CPUExecutionProvider']); "
    "y = s.run(None, {'input': np.load(d + '/x.npy')})[0]; "
    "print(ort.__version__, float(np.abs(y - np.load(d + '/y.npy')).max()))"
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


def ort_check(onnx_blob: bytes, model, calib: np.ndarray) -> dict:
    """onnxruntime (CPU) on the calibration samples against the Keras model in float."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "m.onnx").write_bytes(onnx_blob)
        np.save(Path(tmp, "x.npy"), calib)
        np.save(Path(tmp, "y.npy"), model.predict(calib, batch_size=len(calib), verbose=0))
        cmd = [ORT_PYTHON, "-c", _ORT_CHECK, tmp]
        version, diff = subprocess.run(
            cmd, check=True, capture_output=True, text=True
        ).stdout.split()
    if float(diff) > ORT_TOL:
        raise SystemExit(f"hand-written ONNX differs from Keras by {diff} > {ORT_TOL}")
    return {"onnxruntime": version, "max_abs_diff_vs_keras_on_calib": float(diff), "tol": ORT_TOL}


def _float_onnx(model, spec, calib) -> tuple[bytes, dict]:
    name = spec["name"]
    if name not in tok.HANDWRITTEN:
        info = {
            "exporter": f"tf2onnx {tf2onnx.__version__} convert.from_keras, opset {OPSET}",
            "layout": LAYOUT,
        }
        return export_onnx(model, spec), info
    blob = tok.handwritten_onnx(name, model, spec["shape"])
    info = {
        "exporter": (
            f"onnx.helper (tools/tflite_refs_tokens.py), opset {tok.OPSET}, exactly the Keras "
            "weights; as PyTorch exports it (LayerNormalization / HardSigmoid ops, not tf2onnx's "
            "decomposition)"
        ),
        "graph": tok.HOW[name],
        "check": ort_check(blob, model, calib),
    }
    return blob, info


def calib_set(spec) -> np.ndarray:
    return np.concatenate([s[0] for s in mr.rep_samples(spec)]).astype(np.float32)


def write_float(model, spec, out: Path) -> dict:
    """Write NAME.float.onnx and NAME.calib.npy; returns their manifest entries."""
    name = spec["name"]
    calib = calib_set(spec)
    onnx_blob, how = _float_onnx(model, spec, calib)
    (out / f"{name}.float.onnx").write_bytes(onnx_blob)
    np.save(out / f"{name}.calib.npy", calib)
    return {
        "float_onnx": {
            "file": f"{name}.float.onnx",
            **how,
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
