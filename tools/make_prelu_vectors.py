"""Record int8 PRELU golden vectors (issue 30).

    .venv/bin/python tools/make_prelu_vectors.py

Needs ai-edge-litert (its flatbuffer schema and the BUILTIN_REF interpreter), tflite-micro and
xmos-ai-tools; no TensorFlow. Each case is a one-operator int8 model written here with LiteRT's
flatbuffer schema as TensorFlow's converter writes a Keras ``PReLU``: the input, a constant int8
``alpha`` on its own per-tensor quantization (shape ``(1, 1, C)`` for a per-channel slope,
``(H, W, C)`` for Keras's default unshared one, ``(1, 1, 1)`` for one slope), the output on its
own quantization; operator version 1 (the converter writes 2 for int8, which LiteRT's
BUILTIN_REF resolver does not register; the kernel is the same). Scales are drawn so that
LiteRT's float32 and TFLite-Micro's double multipliers differ in some cases. Each case runs on
seeded int8 inputs on LiteRT's reference kernels, on TFLite-Micro, and, compiled by xcore-opt
(its operators recorded), on XMOS's host interpreter.
Writes ``tests/backends/tflite/prelu_peer_vectors.json``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from ai_edge_litert import schema_py_generated as fb
from xmos_ai_tools import xformer
from xmos_ai_tools.xinterpreters import TFLMHostInterpreter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_resize_vectors import run_litert, run_tflm
from tflite_one_op import _Model, _quant, _serialize

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "prelu_peer_vectors.json"
SAMPLES = 3
#: (input H, W, C), alpha shape.
GEOMETRIES = [
    ((4, 5, 3), (1, 1, 3)),
    ((3, 3, 8), (1, 1, 8)),
    ((2, 6, 4), (2, 6, 4)),
    ((5, 4, 2), (1, 1, 1)),
    ((1, 7, 16), (1, 1, 16)),
]
_BUILTIN = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}


def build(shape, alpha_codes: np.ndarray, q_in, q_alpha, q_out) -> bytes:
    """A one-operator int8 PRELU model of an NHWC ``(1, *shape)`` input (no builtin options)."""
    m = _Model()
    x = m.tensor("input", (1, *shape), fb.TensorType.INT8, _quant(*q_in))
    alpha = m.tensor("alpha", alpha_codes.shape, fb.TensorType.INT8, _quant(*q_alpha), alpha_codes)
    y = m.tensor("output", (1, *shape), fb.TensorType.INT8, _quant(*q_out))
    return _serialize(m, (fb.BuiltinOperator.PRELU, 0, None), [x, alpha], (x, y))


def _name(code) -> str:
    if code.customCode:
        return code.customCode.decode()
    return _BUILTIN[max(code.builtinCode, code.deprecatedBuiltinCode)]


def run_xmos(blob: bytes, x: np.ndarray) -> tuple[list[str], np.ndarray]:
    """xcore-opt's operators for the model and XMOS's host interpreter's outputs."""
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "m.tflite", Path(tmp) / "m.xcore.tflite"
        src.write_bytes(blob)
        xformer.convert(str(src), str(out), {})
        compiled = out.read_bytes()
    model = fb.ModelT.InitFromObj(fb.Model.GetRootAs(compiled, 0))
    ops = [_name(c) for c in model.operatorCodes]
    it = TFLMHostInterpreter()
    it.set_model(model_content=compiled)
    outputs = []
    for sample in x:
        it.set_tensor(0, sample)
        it.invoke()
        outputs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    it.close()
    return ops, np.stack(outputs)


def _draw(rng, low, high) -> tuple[float, int]:
    return float(np.float32(rng.uniform(low, high))), int(rng.integers(-30, 30))


def cases():
    rng = np.random.default_rng(40)
    for index, (shape, alpha_shape) in enumerate(GEOMETRIES * 4):
        q_in, q_out = _draw(rng, 0.005, 0.2), _draw(rng, 0.005, 0.2)
        # slopes both signs, in [-0.5, 1.5] (PReLU's learned slopes), quantized as a constant
        # tensor on its own range (zero point free), as the converter quantizes one
        s_alpha = float(np.float32(rng.uniform(0.0005, 0.01)))
        z_alpha = 0 if index % 4 == 3 else int(rng.integers(-60, 60))
        alpha = rng.integers(-128, 128, alpha_shape).astype(np.int8)
        yield shape, alpha, q_in, (s_alpha, z_alpha), q_out


def on_every_peer(blob: bytes, x: np.ndarray) -> dict:
    """The record fields of one model on inputs ``x``: the model, the inputs, each peer's
    outputs (hex of int8 bytes) and the operators xcore-opt left."""
    peers = {
        name: np.stack([run(blob, sample) for sample in x]).tobytes().hex()
        for name, run in (("litert_reference", run_litert), ("tflite_micro", run_tflm))
    }
    ops, xmos = run_xmos(blob, x)
    peers["xmos_host_interpreter"] = xmos.tobytes().hex()
    fields = {"samples": len(x), "model": blob.hex(), "x": x.tobytes().hex()}
    return {**fields, "outputs": peers, "xcore_opt_operators": ops}


def write(out: Path, tool: str, records: list, layout: str) -> None:
    """The vectors file: provenance (the tool, the peers' versions, the layout) and cases."""
    provenance = {
        "tool": tool,
        "peers": "ai_edge_litert 2.3.0 BUILTIN_REF; tflite_micro runtime (venv); "
        "xmos-ai-tools 1.4.2 xcore-opt + host interpreter",
        "layout": layout,
    }
    out.write_text(json.dumps({"provenance": provenance, "cases": records}, indent=1) + "\n")
    print(f"{len(records)} cases -> {out}")


def main() -> None:
    rng = np.random.default_rng(41)
    records = []
    for shape, alpha, q_in, q_alpha, q_out in cases():
        blob = build(shape, alpha, q_in, q_alpha, q_out)
        x = rng.integers(-128, 128, (SAMPLES, 1, *shape), dtype=np.int8)
        records.append(
            {
                "input_nhwc": list(shape), "alpha_shape": list(alpha.shape),
                "alpha": alpha.tobytes().hex(), "input_quant": list(q_in),
                "alpha_quant": list(q_alpha), "output_quant": list(q_out),
                **on_every_peer(blob, x),
            }
        )  # fmt: skip
    layout = "x and outputs: int8 NHWC bytes, (samples, 1, H, W, C); alpha: int8 bytes"
    write(OUT, "tools/make_prelu_vectors.py", records, layout)


if __name__ == "__main__":
    main()
