"""Record int8 SQUARED_DIFFERENCE, RSQRT, MINIMUM and MAXIMUM golden vectors (issue 15).

    /work/tfenv/bin/python tools/make_elementwise_vectors.py

Needs the TensorFlow venv (TF 2.17 + tf_keras, ai-edge-litert, tflite-micro, xmos-ai-tools
1.4.2); none is a quantemu dependency. Each case is a tf.function with one op, converted to
full-integer int8 with a representative dataset, run on seeded int8 inputs (RSQRT: every code
from the input's zero point up, the codes the kernels accept) through LiteRT's BUILTIN_REF
resolver, TFLite-Micro and XMOS's host interpreter (each peer in a child process: a missing
builtin crashes some of them); xcore-opt's compiled op list is recorded too. Per case the file
holds the model (hex), every input's quantization (a constant operand with its codes), the
output's, the inputs' codes and each peer's output codes (hex of the int8 bytes), or the peer's
refusal. Writes ``tests/backends/tflite/elementwise_peer_vectors.json``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# versions() runs ``xcore-opt`` from PATH; it sits beside this interpreter in the venv.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_refs_run as rr

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "elementwise_peer_vectors.json"
SAMPLES = 8


def _convert(fn, specs, ranges, seed: int) -> bytes:
    rng = np.random.default_rng(seed)

    def rep():
        for _ in range(32):
            yield [
                rng.uniform(lo, hi, s.shape).astype(np.float32)
                for s, (lo, hi) in zip(specs, ranges, strict=True)
            ]

    conc = tf.function(fn, input_signature=specs).get_concrete_function()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([conc], fn)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


def _spec(*shape):
    return tf.TensorSpec(shape, tf.float32)


def cases() -> list[dict]:
    """(name, op, fn, specs, calibration ranges) of every model."""
    out = []
    for k, (lo, hi) in enumerate(
        ((0.01, 4.0), (0.5, 2.0), (1e-3, 100.0), (0.1, 10.0), (1e-5, 0.02))
    ):
        out.append(
            dict(
                name=f"rsqrt_{k}",
                op="RSQRT",
                fn=tf.math.rsqrt,
                specs=[_spec(1, 256)],
                ranges=[(lo, hi)],
            )
        )
    for k, (r1, r2) in enumerate(
        (((-3, 3), (-3, 3)), ((-1, 4), (-0.5, 0.5)), ((-20, 20), (-2, 1)))
    ):
        out.append(
            dict(
                name=f"squared_difference_{k}",
                op="SQUARED_DIFFERENCE",
                fn=tf.math.squared_difference,
                specs=[_spec(1, 4, 16), _spec(1, 4, 16)],
                ranges=[r1, r2],
            )
        )
        out.append(
            dict(
                name=f"squared_difference_bcast_{k}",
                op="SQUARED_DIFFERENCE",
                fn=tf.math.squared_difference,
                specs=[_spec(1, 4, 16), _spec(1, 4, 1)],
                ranges=[r1, r2],
            )
        )
    for op, f in (("MINIMUM", tf.math.minimum), ("MAXIMUM", tf.math.maximum)):
        # maximum(x, 0) converts to RELU: the constants avoid 0 there
        consts = (1.0, 0.0, 0.7) if op == "MINIMUM" else (1.0, -0.4, 0.7)
        for k, ((lo, hi), c) in enumerate(
            zip(((-3.0, 3.0), (-1.0, 6.0), (0.0, 2.0)), consts, strict=True)
        ):
            out.append(
                dict(
                    name=f"{op.lower()}_const_{k}",
                    op=op,
                    fn=lambda x, f=f, c=c: f(x, tf.constant(c, tf.float32)),
                    specs=[_spec(1, 4, 16)],
                    ranges=[(lo, hi)],
                )
            )
        out.append(
            dict(
                name=f"{op.lower()}_pair",
                op=op,
                fn=lambda a, b, f=f: f(a, b),
                specs=[_spec(1, 4, 16), _spec(1, 4, 16)],
                ranges=[(-2, 2), (-1, 3)],
            )
        )
        out.append(
            dict(
                name=f"{op.lower()}_bcast",
                op=op,
                fn=lambda a, b, f=f: f(a, b),
                specs=[_spec(1, 4, 16), _spec(1, 1, 16)],
                ranges=[(-2, 2), (-2, 2)],
            )
        )
    return out


def _runner(kind: str, blob: bytes, feeds: list[list[np.ndarray]]) -> list[np.ndarray]:
    if kind == "litert_ref":
        it = Interpreter(
            model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF
        )
        it.allocate_tensors()
        ins, out = it.get_input_details(), it.get_output_details()[0]["index"]
        ys = []
        for feed in feeds:
            for d, x in zip(ins, feed, strict=True):
                it.set_tensor(d["index"], x)
            it.invoke()
            ys.append(it.get_tensor(out).copy())
        return ys
    if kind == "tflite_micro":
        it = rr.tflm_runtime.Interpreter.from_bytes(blob, arena_size=rr.TFLM_ARENA)
        ys = []
        for feed in feeds:
            for i, x in enumerate(feed):
                it.set_input(x, i)
            it.invoke()
            ys.append(it.get_output(0).copy())
        return ys
    it = rr.TFLMHostInterpreter()
    it.set_model(model_content=blob)
    out = int(rr.load_model(blob).subgraphs[0].outputs[0])
    ys = []
    for feed in feeds:
        for i, x in enumerate(feed):
            it.set_tensor(i, x)
        it.invoke()
        ys.append(it.get_tensor(out).copy())
    it.close()
    return ys


def _child(conn, kind, blob, feeds) -> None:
    try:
        conn.send(("ok", _runner(kind, blob, feeds)))
    except Exception as e:  # the peer's refusal is the result to record
        conn.send(("error", f"{type(e).__name__}: {e}"[:300]))
    conn.close()


def run_isolated(kind: str, blob: bytes, feeds) -> tuple[str, object]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, kind, blob, feeds))
    proc.start()
    child.close()
    try:
        res = parent.recv()
    except EOFError:
        res = None
    proc.join()
    if res is None:
        return "error", f"process ended with exit code {proc.exitcode}"
    return res


def _tensors(blob: bytes) -> tuple[list[dict], dict]:
    """The op's operands (a constant with its codes) and output, with their quantization."""
    model = rr.load_model(blob)
    sg = model.subgraphs[0]
    (op,) = sg.operators
    operands = []
    for idx in op.inputs:
        info = rr.tensor_info(model, int(idx))
        buf = model.buffers[sg.tensors[idx].buffer].data
        if buf is not None and len(buf):
            info["const_hex"] = bytes(bytearray(buf)).hex()
        info["graph_input"] = [int(i) for i in sg.inputs].index(idx) if idx in sg.inputs else None
        operands.append(info)
    return operands, rr.tensor_info(model, int(op.outputs[0]))


def _feeds(case: dict, operands: list[dict], seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    shapes = [s.shape.as_list() for s in case["specs"]]
    if case["op"] == "RSQRT":  # codes below the zero point are negative: both peers refuse them
        zp = operands[0]["zero_point"]
        codes = np.arange(-128, 128)
        codes = np.where(codes < zp, zp, codes)
        return [[codes.astype(np.int8).reshape(shapes[0])]]
    return [[rng.integers(-128, 128, s).astype(np.int8) for s in shapes] for _ in range(SAMPLES)]


def xcore_opt(blob: bytes) -> dict:
    """xcore-opt (default options) on the model: its return code and the compiled op list."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "m.int8.tflite", Path(tmp) / "m.xcore.tflite"
        src.write_bytes(blob)
        run = subprocess.run(
            ["xcore-opt", "-o", str(dst), str(src)], check=False, capture_output=True
        )
        ops = rr.op_list(dst.read_bytes()) if run.returncode == 0 else None
    return {"returncode": run.returncode, "ops": ops}


def main() -> None:
    records, accepted = [], {}
    for k, case in enumerate(cases()):
        blob = _convert(case["fn"], case["specs"], case["ranges"], seed=k)
        ops = rr.op_list(blob)
        assert ops == [case["op"]], (case["name"], ops)
        operands, output = _tensors(blob)
        feeds = _feeds(case, operands, seed=100 + k)
        rec = {"name": case["name"], "op": case["op"], "operands": operands, "output": output}
        rec["xcore_opt"] = xcore_opt(blob)
        rec["model_hex"] = blob.hex()  # a few hundred bytes: the import tests load it
        rec["inputs_hex"] = [[x.tobytes().hex() for x in feed] for feed in feeds]
        for kind in ("litert_ref", "tflite_micro", "xmos_host_interpreter"):
            status, res = run_isolated(kind, blob, feeds)
            if status == "ok":
                rec[f"{kind}_hex"] = [np.asarray(y, np.int8).tobytes().hex() for y in res]
            else:
                rec[f"{kind}_error"] = res
            accepted.setdefault(case["op"], {})[kind] = status == "ok"
        records.append(rec)
        print(
            case["name"],
            {
                k: ("ok" if f"{k}_hex" in rec else rec[f"{k}_error"])
                for k in ("litert_ref", "tflite_micro", "xmos_host_interpreter")
            },
            flush=True,
        )
    doc = {"versions": rr.versions(), "accepted": accepted, "cases": records}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}: {len(records)} cases; {accepted}")


if __name__ == "__main__":
    main()
