"""Record which convolutions xcore-opt 1.4.2 keeps as TFLite builtins, in
``tests/data/xformer_kept/`` (issue 30).

    .venv/bin/python tools/make_xformer_kept_builtins.py

Needs ai-edge-litert and xmos-ai-tools 1.4.2 (xcore-opt and its host interpreter), both in
quantemu's dev venv; no TensorFlow: each model is one CONV_2D, DEPTHWISE_CONV_2D or
FULLY_CONNECTED written by ``tflite_one_op.py``. Per case NAME: ``NAME.int8.tflite``, its
``xcore-opt -o NAME.xcore.tflite NAME.int8.tflite`` build (default options) when xcore-opt
builds it, and ``NAME.npz``: ``x_int8`` (seeded codes), ``y_xcore`` (XMOS's
``TFLMHostInterpreter`` on the compiled model; it crashes on these uncompiled files, so the
int8 model is not run on it) and ``y_tflite_ref`` (LiteRT's BUILTIN_REF kernels).
``MANIFEST.json`` holds each case's spec, the compiled operator list and xcore-opt's
failure where it fails.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from xmos_ai_tools.xinterpreters import TFLMHostInterpreter

from tflite_one_op import OneOp, build

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "xformer_kept"
N_INPUTS = 4
_BUILTIN = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}

# name -> (spec, what xcore-opt 1.4.2 does with it, as ConvPatterns.td / OptimizeConv2D.cpp say)
CASES = {
    "dw_c1_dm8": (OneOp("depthwise", (10, 10, 1), 8, seed=1), "kept"),
    "dw_c1_dm8_same_s2": (
        OneOp("depthwise", (9, 9, 1), 8, padding="SAME", strides=(2, 2), seed=2),
        "kept",
    ),
    "dw_c1_dm4_dilated_relu": (
        OneOp("depthwise", (12, 12, 1), 4, dilations=(2, 2), activation="RELU", seed=3),
        "kept",
    ),
    "dw_c2_dm3_relu6": (OneOp("depthwise", (8, 8, 2), 6, activation="RELU6", seed=4), "kept"),
    "dw_c3_dm2_same": (OneOp("depthwise", (8, 8, 3), 6, padding="SAME", seed=5), "kept"),
    "dw_c4_dm2": (OneOp("depthwise", (8, 8, 4), 8, seed=6), "miscompiled"),
    "dw_c8_no_bias": (OneOp("depthwise", (8, 8, 8), 8, bias=False, seed=7), "aborts"),
    "dw_c3_dm1": (OneOp("depthwise", (8, 8, 3), 3, seed=8), "compiled"),
    "dw_c6_dm1_same": (OneOp("depthwise", (8, 8, 6), 6, padding="SAME", seed=9), "compiled"),
    "conv_c1": (OneOp("conv", (8, 8, 1), 8, seed=10), "compiled"),
    "conv_c3_o5": (OneOp("conv", (8, 8, 3), 5, seed=11), "compiled"),
    "conv_grouped": (OneOp("conv", (8, 8, 8), 8, groups=2, seed=12), "kept"),
    "fc_20_6": (OneOp("fc", (20,), 6, seed=13), "compiled"),
}


def op_list(blob: bytes) -> list[str]:
    model = fb.ModelT.InitFromPackedBuf(blob, 0)
    names = []
    for op in model.subgraphs[0].operators:
        code = model.operatorCodes[op.opcodeIndex]
        if code.customCode:
            names.append(code.customCode.decode())
        else:
            names.append(_BUILTIN[max(code.builtinCode, code.deprecatedBuiltinCode)])
    return names


def xcore_opt(blob: bytes) -> tuple[bytes | None, str]:
    """The compiled model and xcore-opt's stderr, or None and its failure."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "m.int8.tflite", Path(tmp) / "m.xcore.tflite"
        src.write_bytes(blob)
        res = subprocess.run(
            ["xcore-opt", "-o", str(dst), str(src)], check=False, capture_output=True, text=True
        )
        if res.returncode != 0:
            frames = [ln.strip() for ln in res.stderr.splitlines() if "tflite_micro::" in ln]
            return None, f"xcore-opt exit code {res.returncode}; " + " | ".join(frames[:3])
        return dst.read_bytes(), res.stderr.strip()


def _each(x: np.ndarray, step) -> np.ndarray:
    """``step`` (one batch-1 sample -> its output) over the samples of ``x``, stacked."""
    return np.stack([step(xi[None]) for xi in x])


def run_xmos(blob: bytes, x: np.ndarray) -> np.ndarray:
    it = TFLMHostInterpreter()
    it.set_model(model_content=blob)
    out = int(fb.ModelT.InitFromPackedBuf(blob, 0).subgraphs[0].outputs[0])

    def step(xi):
        it.set_tensor(0, xi)
        it.invoke()
        return it.get_tensor(out)[0].copy()

    y = _each(x, step)
    it.close()
    return y


def run_litert(blob: bytes, x: np.ndarray) -> np.ndarray:
    it = Interpreter(model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i_idx, o_idx = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

    def step(xi):
        it.set_tensor(i_idx, xi)
        it.invoke()
        return it.get_tensor(o_idx)[0].copy()

    return _each(x, step)


def make_one(name: str, spec: OneOp, expected: str) -> dict:
    blob = build(spec)
    (OUT / f"{name}.int8.tflite").write_bytes(blob)
    x = np.random.default_rng(1000 + spec.seed).integers(
        -128, 128, (N_INPUTS, *spec.shape), dtype=np.int8
    )
    arrays = {"x_int8": x}
    compiled, said = xcore_opt(blob)
    entry = {"spec": dataclasses.asdict(spec), "expected": expected, "xcore_opt_stderr": said}
    try:
        arrays["y_tflite_ref"] = run_litert(blob, x)
    except RuntimeError as exc:  # a DEPTHWISE_CONV_2D without a bias: LiteRT refuses it too
        entry["litert_error"] = " ".join(str(exc).split())
    if compiled is not None:
        (OUT / f"{name}.xcore.tflite").write_bytes(compiled)
        entry["xcore_ops"] = op_list(compiled)
        arrays["y_xcore"] = run_xmos(compiled, x)
    np.savez_compressed(OUT / f"{name}.npz", **arrays)
    return entry


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cases = {name: make_one(name, *case) for name, case in CASES.items()}
    versions = {p: md.version(p) for p in ("ai-edge-litert", "xmos-ai-tools", "numpy")}
    manifest = {
        "set": "quantemu issue 30: convolutions xcore-opt 1.4.2 keeps as TFLite builtins",
        "script": "tools/make_xformer_kept_builtins.py (+ tools/tflite_one_op.py)",
        "versions": versions,
        "cases": cases,
    }
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
