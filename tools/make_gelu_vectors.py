"""Record int8 GELU golden vectors from the peer runtimes (issue 15).

    /work/tfenv/bin/python tools/make_gelu_vectors.py

Needs the TensorFlow venv (TF 2.17 + tf_keras, ai-edge-litert, tflite-micro, xmos-ai-tools
1.4.2); none is a quantemu dependency. For each ``approximate`` and input range, a tf_keras
model ``x -> tf.nn.gelu(x)`` is converted to full-integer int8 (the converter emits one GELU
op), and all 256 input codes run through LiteRT's BUILTIN_REF and BUILTIN resolvers. Whether
TFLite-Micro, XMOS's host interpreter and xcore-opt accept the model is recorded too (the
installed builds have no GELU kernel). Codes are stored as the hex of the int8
bytes, code -128 first. Writes ``tests/backends/tflite/gelu_peer_vectors.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# xformer.convert runs ``xcore-opt`` from PATH; it sits beside this interpreter in the venv.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

import numpy as np
import tensorflow as tf
import tf_keras as keras
from ai_edge_litert.interpreter import OpResolverType

import tflite_refs_run as rr

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "gelu_peer_vectors.json"
#: Calibration ranges: each gives a different pair of input/output quantizations.
RANGES = ((-4.0, 3.0), (-1.0, 1.0), (-8.0, 8.0), (-0.3, 6.0), (-20.0, 2.0), (-2.5, 0.7))


def build(approximate: bool, lo: float, hi: float, seed: int) -> bytes:
    x = keras.Input((256,))
    y = keras.layers.Lambda(lambda t: tf.nn.gelu(t, approximate=approximate))(x)
    model = keras.Model(x, y)
    rng = np.random.default_rng(seed)

    def rep():
        for _ in range(16):
            yield [rng.uniform(lo, hi, (1, 256)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


_PROBES = {
    "tflite_micro": (
        "from tflite_micro.python.tflite_micro import runtime as r; "
        "r.Interpreter.from_bytes(open(P, 'rb').read(), arena_size=1 << 22)"
    ),
    "xmos_host_interpreter": (
        "from xmos_ai_tools.xinterpreters import TFLMHostInterpreter as T; "
        "T().set_model(model_content=open(P, 'rb').read())"
    ),
}


def _lines(text: str) -> list[str]:
    """The peer's own messages: C-level stderr, without Python/TF log noise or temp paths."""
    keep = ("GELU", "failed", "error", "Error")
    return [ln.strip() for ln in text.splitlines() if any(k in ln for k in keep) and "/" not in ln]


def peers_on(blob: bytes) -> dict:
    """Whether TFLite-Micro, XMOS's host interpreter and xcore-opt take the model: each in a
    child process, as their refusals print from C (or crash)."""
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gelu.int8.tflite"
        path.write_bytes(blob)
        for name, code in _PROBES.items():
            run = subprocess.run(
                [sys.executable, "-c", f"P = {str(path)!r}; {code}"],
                check=False,
                capture_output=True,
                text=True,
            )
            res[name] = {"returncode": run.returncode, "messages": _lines(run.stdout + run.stderr)}
        run = subprocess.run(
            ["xcore-opt", "-o", str(path.with_suffix(".xc")), str(path)],
            check=False,
            capture_output=True,
            text=True,
        )
        res["xcore_opt"] = {
            "returncode": run.returncode,
            "messages": _lines(run.stdout + run.stderr),
        }
    return res


def main() -> None:
    codes = np.arange(-128, 128, dtype=np.int8)[None]
    cases, peers = [], {}
    for approximate in (False, True):
        for k, (lo, hi) in enumerate(RANGES):
            blob = build(approximate, lo, hi, seed=k)
            ops = rr.op_list(blob)
            assert ops == ["GELU"], ops
            i, o = rr.io_info(blob)
            ref = rr.run_litert(blob, codes, OpResolverType.BUILTIN_REF)[0]
            opt = rr.run_litert(blob, codes, OpResolverType.BUILTIN)[0]
            cases.append(
                {
                    "approximate": approximate,
                    "s_in": i["scale"],
                    "zp_in": i["zero_point"],
                    "s_out": o["scale"],
                    "zp_out": o["zero_point"],
                    "litert_ref_hex": ref.astype(np.int8).tobytes().hex(),
                    "litert_builtin_same": bool((ref == opt).all()),
                }
            )
            peers = peers or peers_on(blob)
    doc = {"versions": rr.versions(), "peers_on_gelu": peers, "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}: {len(cases)} cases; {peers}")


if __name__ == "__main__":
    main()
