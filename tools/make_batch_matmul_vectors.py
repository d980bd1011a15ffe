"""Record int8 BATCH_MATMUL golden vectors from the peer runtimes (issue 15).

    /work/tfenv/bin/python tools/make_batch_matmul_vectors.py

Needs the TensorFlow venv (TF 2.17 + tf_keras, ai-edge-litert, tflite-micro, xmos-ai-tools
1.4.2); none is a quantemu dependency. Each case is a tf_keras model around ``tf.matmul`` of two
activations (attention's ``q @ k^T`` and ``p @ v``, 3-D and 4-D, broadcast batch axes), converted
to full-integer int8 (per-tensor int8 on both operands, no bias). Seeded int8 codes run through
LiteRT's BUILTIN_REF and BUILTIN resolvers, the TFLite-Micro runtime, and XMOS's host interpreter
on the xcore-opt build (which keeps BATCH_MATMUL as a TFLite builtin). Writes
``tests/data/batch_matmul/``: ``<case>.int8.tflite``, ``<case>.xcore.tflite``, ``<case>.npz``
(inputs ``in0``, ``in1``... and one output array per runtime) and ``MANIFEST.json``.
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
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from tflite_micro.python.tflite_micro import runtime as tflm_runtime
from xmos_ai_tools.xinterpreters import TFLMHostInterpreter

import tflite_refs_run as rr

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "batch_matmul"
N_SAMPLES = 4

#: name -> (input shapes without the Keras batch axis, calibration ranges, matmul kwargs)
CASES = {
    "qk_3d": (((16, 8), (16, 8)), ((-3.0, 2.0), (-1.0, 4.0)), {"transpose_b": True}),
    "pv_3d": (((16, 16), (16, 8)), ((0.0, 1.0), (-2.0, 2.5)), {}),
    "mh_4d": (((4, 16, 8), (4, 8, 16)), ((-2.0, 2.0), (-1.5, 3.0)), {}),
    "mh_4d_adj_y": (((4, 16, 8), (4, 16, 8)), ((-1.0, 1.0), (-4.0, 1.0)), {"transpose_b": True}),
    "bcast_4d": (((4, 16, 8), (1, 8, 16)), ((-2.0, 2.0), (-1.0, 1.0)), {}),
    "bcast_5d": (((2, 1, 5, 6), (3, 6, 7)), ((-1.0, 3.0), (-2.0, 2.0)), {}),
    "adj_x_3d": (((8, 16), (8, 12)), ((-1.0, 1.0), (-1.0, 2.0)), {"transpose_a": True}),
}


def _convert(model, rep) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


def build_two_input(shapes, ranges, kwargs, seed: int) -> bytes:
    keras.backend.clear_session()
    # The converter orders a signature's inputs by name: name them in operand order.
    a, b = (keras.Input(s, name=f"in{i}") for i, s in enumerate(shapes))
    y = keras.layers.Lambda(lambda t: tf.matmul(t[0], t[1], **kwargs))([a, b])
    rng = np.random.default_rng(seed)

    def rep():
        for _ in range(32):
            yield [
                rng.uniform(lo, hi, (1, *s)).astype(np.float32)
                for s, (lo, hi) in zip(shapes, ranges, strict=True)
            ]

    return _convert(keras.Model([a, b], y), rep)


def build_qk_dense(seed: int) -> bytes:
    """Attention scores from one token input: Dense q and k, then ``q @ k^T``."""
    keras.utils.set_random_seed(seed)
    x = keras.Input((16, 32), batch_size=1)
    q, k = keras.layers.Dense(8)(x), keras.layers.Dense(8)(x)
    y = keras.layers.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True))([q, k])
    rng = np.random.default_rng(seed)

    def rep():
        for _ in range(32):
            yield [rng.standard_normal((1, 16, 32)).astype(np.float32)]

    return _convert(keras.Model(x, y), rep)


def _inputs(blob: bytes) -> list[dict]:
    it = Interpreter(model_content=blob)
    return sorted(it.get_input_details(), key=lambda d: d["index"])


def run_litert(blob: bytes, xs: list[np.ndarray], resolver) -> np.ndarray:
    it = Interpreter(model_content=blob, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    ins = sorted(it.get_input_details(), key=lambda d: d["index"])
    o_idx = it.get_output_details()[0]["index"]
    ys = []
    for n in range(N_SAMPLES):
        for d, x in zip(ins, xs, strict=True):
            it.set_tensor(d["index"], x[n][None])
        it.invoke()
        ys.append(it.get_tensor(o_idx)[0].copy())
    return np.stack(ys)


def run_tflm(blob: bytes, xs: list[np.ndarray]) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(blob, arena_size=rr.TFLM_ARENA)
    ys = []
    for n in range(N_SAMPLES):
        for i, x in enumerate(xs):
            it.set_input(x[n][None], i)
        it.invoke()
        ys.append(it.get_output(0)[0].copy())
    return np.stack(ys)


def run_xmos(blob: bytes, xs: list[np.ndarray]) -> np.ndarray:
    out = int(rr.load_model(blob).subgraphs[0].outputs[0])
    it = TFLMHostInterpreter()
    it.set_model(model_content=blob)
    ys = []
    for n in range(N_SAMPLES):
        for i, x in enumerate(xs):
            it.set_tensor(i, x[n][None])
        it.invoke()
        ys.append(it.get_tensor(out)[0].copy())
    it.close()
    return np.stack(ys)


def _lines(text: str) -> list[str]:
    """The peer's own messages: C-level stderr, without Python/TF log noise or temp paths."""
    keep = ("BATCH_MATMUL", "failed", "error", "Error")
    return [ln.strip() for ln in text.splitlines() if any(k in ln for k in keep) and "/" not in ln]


def probe_xmos(path: Path) -> dict:
    """Whether xcore-opt and XMOS's host interpreter take the int8 model: each in a child
    process, as their refusals print from C (the host interpreter's set_model does not raise)."""
    code = (
        "from xmos_ai_tools.xinterpreters import TFLMHostInterpreter as T; "
        f"t = T(); t.set_model(model_content=open({str(path)!r}, 'rb').read()); t.invoke()"
    )
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, cmd in (
            ("host_interpreter_int8", [sys.executable, "-c", code]),
            ("xcore_opt", ["xcore-opt", "-o", str(Path(tmp) / "m.xcore.tflite"), str(path)]),
        ):
            run = subprocess.run(cmd, check=False, capture_output=True, text=True)
            res[key] = {"returncode": run.returncode, "messages": _lines(run.stdout + run.stderr)}
    return res


def bmm_params(blob: bytes) -> list[dict]:
    """Each BATCH_MATMUL's adj_x / adj_y and its operand and output quantizations."""
    model = rr.load_model(blob)
    res = []
    for i, op in enumerate(model.subgraphs[0].operators):
        if rr.op_name(model, op) != "BATCH_MATMUL":
            continue
        opt = op.builtinOptions
        row = {"op_index": i, "adj_x": bool(opt.adjX), "adj_y": bool(opt.adjY)}
        for key, t in zip(("lhs", "rhs"), op.inputs, strict=True):
            row[key] = rr.tensor_info(model, int(t))
        row["output"] = rr.tensor_info(model, int(op.outputs[0]))
        res.append(row)
    return res


def record(name: str, blob: bytes, seed: int) -> dict:
    (OUT / f"{name}.int8.tflite").write_bytes(blob)
    rng = np.random.default_rng(1000 + seed)
    xs = [
        rng.integers(-128, 128, (N_SAMPLES, *d["shape"][1:]), dtype=np.int64).astype(np.int8)
        for d in _inputs(blob)
    ]
    outs = {
        "litert_ref": run_litert(blob, xs, OpResolverType.BUILTIN_REF),
        "litert_builtin": run_litert(blob, xs, OpResolverType.BUILTIN),
    }
    try:
        outs["tflm"] = run_tflm(blob, xs)
        tflm_error = None
    except RuntimeError as e:  # recorded: the runtime refused the model
        tflm_error = str(e)
    xmos = probe_xmos(OUT / f"{name}.int8.tflite")
    if xmos["xcore_opt"]["returncode"] == 0:
        xblob, _ = rr.run_xformer(OUT / f"{name}.int8.tflite", name)
        (OUT / f"{name}.xcore.tflite").write_bytes(xblob)
        outs["xmos_xcore"] = run_xmos(xblob, xs)
    np.savez_compressed(OUT / f"{name}.npz", **{f"in{i}": x for i, x in enumerate(xs)}, **outs)
    ref = outs["litert_ref"]
    return {
        "ops": rr.op_list(blob),
        "batch_matmul": bmm_params(blob),
        "input_seed": 1000 + seed,
        "n_samples": N_SAMPLES,
        "tflm_error": tflm_error,
        "xmos": xmos,
        "vs_litert_ref": {k: rr.diff_stats(v, ref) for k, v in outs.items() if k != "litert_ref"},
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {
        "command": "/work/tfenv/bin/python tools/make_batch_matmul_vectors.py",
        "versions": rr.versions(),
        "cases": {},
    }
    for seed, (name, (shapes, ranges, kwargs)) in enumerate(CASES.items()):
        blob = build_two_input(shapes, ranges, kwargs, seed)
        manifest["cases"][name] = {"shapes": shapes, "ranges": ranges, "matmul": kwargs}
        manifest["cases"][name] |= record(name, blob, seed)
    seed = len(CASES)
    manifest["cases"]["qk_dense"] = {"model": "Dense q, k (8) of (16, 32); q @ k^T"}
    manifest["cases"]["qk_dense"] |= record("qk_dense", build_qk_dense(seed), seed)
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name, c in manifest["cases"].items():
        print(name, c["ops"], c["xmos"], c["vs_litert_ref"])


if __name__ == "__main__":
    main()
