"""Record int8 golden vectors of a standalone batch normalization as TensorFlow's converter
writes it: MUL by a per-channel constant, then ADD of another (issue 30).

    .venv/bin/python tools/make_batch_norm_vectors.py

Needs ai-edge-litert (its flatbuffer schema and the BUILTIN_REF interpreter), tflite-micro and
xmos-ai-tools; no TensorFlow. Each case is an int8 model written here with LiteRT's flatbuffer
schema: ``y = ADD(MUL(x, m), o)`` with ``m`` and ``o`` constant int8 ``(C,)`` tensors on their
own per-tensor quantization (as the converter quantizes constant operands) and the product
and output on theirs (operator version 2, int8). Each case runs on seeded int8 inputs on
LiteRT's reference kernels, on TFLite-Micro and, compiled by xcore-opt (its operators
recorded: it broadcasts the constants and writes XC_mul and XC_add), on XMOS's host
interpreter. Writes ``tests/backends/tflite/batch_norm_peer_vectors.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_prelu_vectors import on_every_peer, write
from tflite_one_op import _Model, _quant

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "batch_norm_peer_vectors.json"
SAMPLES = 3
SHAPES = [(5, 4, 6), (3, 3, 16), (7, 2, 3), (1, 1, 32), (4, 6, 8)]
_OPS = (
    (fb.BuiltinOperator.MUL, fb.BuiltinOptions.MulOptions, fb.MulOptionsT),
    (fb.BuiltinOperator.ADD, fb.BuiltinOptions.AddOptions, fb.AddOptionsT),
)


def build(shape, constants, quants) -> bytes:
    """``ADD(MUL(x, m), o)`` on an NHWC ``(1, *shape)`` input; ``constants`` = (m, o) codes,
    ``quants`` = the (scale, zero point) of x, m, the product, o and y."""
    q_x, q_m, q_mid, q_o, q_y = quants
    model = _Model()
    x = model.tensor("x", (1, *shape), fb.TensorType.INT8, _quant(*q_x))
    m = model.tensor("m", constants[0].shape, fb.TensorType.INT8, _quant(*q_m), constants[0])
    mid = model.tensor("mul", (1, *shape), fb.TensorType.INT8, _quant(*q_mid))
    o = model.tensor("o", constants[1].shape, fb.TensorType.INT8, _quant(*q_o), constants[1])
    y = model.tensor("y", (1, *shape), fb.TensorType.INT8, _quant(*q_y))
    codes, ops = [], []
    for index, ((code, kind, options), ins, out) in enumerate(
        zip(_OPS, ([x, m], [mid, o]), (mid, y), strict=True)
    ):
        opcode = fb.OperatorCodeT()
        opcode.builtinCode = opcode.deprecatedBuiltinCode = code
        opcode.version = 2
        op = fb.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = index, ins, [out]
        op.builtinOptionsType, op.builtinOptions = kind, options()
        codes.append(opcode)
        ops.append(op)
    sub = fb.SubGraphT()
    sub.tensors, sub.operators, sub.inputs, sub.outputs = model.tensors, ops, [x], [y]
    flat = fb.ModelT()
    flat.version, flat.operatorCodes, flat.subgraphs = 3, codes, [sub]
    flat.buffers, flat.description = model.buffers, "quantemu tools/make_batch_norm_vectors.py"
    builder = flatbuffers.Builder(1024)
    builder.Finish(flat.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def cases():
    rng = np.random.default_rng(50)
    for shape in SHAPES * 2:
        c = shape[-1]
        constants = tuple(rng.integers(-128, 128, (c,)).astype(np.int8) for _ in range(2))
        quants = tuple(
            (float(np.float32(rng.uniform(lo, hi))), int(rng.integers(-40, 40)))
            for lo, hi in ((0.01, 0.1), (0.002, 0.02), (0.01, 0.1), (0.002, 0.02), (0.01, 0.1))
        )
        yield shape, constants, quants


def main() -> None:
    rng = np.random.default_rng(51)
    records = []
    for shape, constants, quants in cases():
        blob = build(shape, constants, quants)
        x = rng.integers(-128, 128, (SAMPLES, 1, *shape), dtype=np.int8)
        fields = {"input_nhwc": list(shape), "quantizations": [list(q) for q in quants]}
        records.append({**fields, **on_every_peer(blob, x)})
    layout = "x and outputs: int8 NHWC bytes, (samples, 1, H, W, C)"
    write(OUT, "tools/make_batch_norm_vectors.py", records, layout)


if __name__ == "__main__":
    main()
