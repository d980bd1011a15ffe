"""Record int8 RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR golden vectors (issue 30).

    .venv/bin/python tools/make_resize_vectors.py

Needs ai-edge-litert (its flatbuffer schema and the BUILTIN_REF interpreter) and tflite-micro;
no TensorFlow. Each case is a one-operator int8 model written here with LiteRT's flatbuffer
schema as TensorFlow's converter writes a Keras ``UpSampling2D`` / ``tf.image.resize`` (the
input, a constant int32 ``size`` and an output on the input's scale and zero point; operator
version 3 when ``half_pixel_centers`` is set, else 2, as the converter versions int8 resizes),
run on seeded int8 inputs by LiteRT's reference kernels and by TFLite-Micro. Per case the file
holds the model (hex), the flags, the input codes (NHWC) and each peer's output codes (hex of
the int8 bytes). Writes ``tests/backends/tflite/resize_peer_vectors.json``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from tflite_micro.python.tflite_micro import runtime as tflm_runtime

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "resize_peer_vectors.json"
SAMPLES = 3
#: (input H, W, C), output (H, W): up, down, odd ratios, a 1-pixel axis.
GEOMETRIES = [
    ((4, 5, 3), (8, 10)),
    ((5, 7, 2), (3, 4)),
    ((3, 3, 4), (7, 2)),
    ((1, 2, 3), (5, 9)),
    ((6, 4, 2), (13, 11)),
    ((8, 8, 2), (4, 4)),
]
_OPS = {
    "nearest": (
        fb.BuiltinOperator.RESIZE_NEAREST_NEIGHBOR,
        fb.BuiltinOptions.ResizeNearestNeighborOptions,
    ),
    "bilinear": (fb.BuiltinOperator.RESIZE_BILINEAR, fb.BuiltinOptions.ResizeBilinearOptions),
}


def _tensor(name, shape, dtype, buffer, quant=None):
    t = fb.TensorT()
    t.name, t.shape, t.type, t.buffer = name.encode(), list(shape), dtype, buffer
    if quant is not None:
        t.quantization = fb.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [quant[0]], [quant[1]]
    return t


def build(kind: str, shape, size, *, align: bool, half: bool, quant) -> bytes:
    """A one-operator int8 model: ``kind`` (nearest / bilinear) of an NHWC ``(1, *shape)``
    input to ``size`` (H, W), on the quantization ``quant`` = (scale, zero point)."""
    code, options_type = _OPS[kind]
    options = (
        fb.ResizeBilinearOptionsT() if kind == "bilinear" else fb.ResizeNearestNeighborOptionsT()
    )
    options.alignCorners, options.halfPixelCenters = align, half
    opcode = fb.OperatorCodeT()
    opcode.builtinCode = opcode.deprecatedBuiltinCode = code
    opcode.version = 3 if half else 2
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1], [2]
    op.builtinOptionsType, op.builtinOptions = options_type, options
    sub = fb.SubGraphT()
    sub.tensors = [
        _tensor("input", (1, *shape), fb.TensorType.INT8, 0, quant),
        _tensor("size", (2,), fb.TensorType.INT32, 1),
        _tensor("output", (1, *size, shape[2]), fb.TensorType.INT8, 0, quant),
    ]
    sub.inputs, sub.outputs, sub.operators = [0], [2], [op]
    empty, size_buf = fb.BufferT(), fb.BufferT()
    size_buf.data = list(np.asarray(size, "<i4").tobytes())
    model = fb.ModelT()
    model.version, model.operatorCodes, model.subgraphs = 3, [opcode], [sub]
    model.buffers, model.description = [empty, size_buf], b"quantemu make_resize_vectors"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def run_litert(blob: bytes, x: np.ndarray) -> np.ndarray:
    it = Interpreter(model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def run_tflm(blob: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def cases():
    rng = np.random.default_rng(30)
    flags = [(False, False), (True, False), (False, True), (True, True)]
    for (shape, size), kind, (align, half) in itertools.product(
        GEOMETRIES, ("nearest", "bilinear"), flags
    ):
        if kind == "bilinear" and align and half:
            continue  # the kernel's Prepare refuses the pair
        quant = (float(np.float32(rng.uniform(0.01, 0.2))), int(rng.integers(-20, 20)))
        yield kind, shape, size, align, half, quant


def main() -> None:
    rng = np.random.default_rng(31)
    records = []
    for kind, shape, size, align, half, quant in cases():
        blob = build(kind, shape, size, align=align, half=half, quant=quant)
        x = rng.integers(-128, 128, (SAMPLES, 1, *shape), dtype=np.int8)
        peers = {
            name: np.stack([run(blob, sample) for sample in x]).tobytes().hex()
            for name, run in (("litert_reference", run_litert), ("tflite_micro", run_tflm))
        }
        records.append(
            {
                "op": kind, "input_nhwc": list(shape), "size": list(size),
                "align_corners": align, "half_pixel_centers": half,
                "scale": quant[0], "zero_point": quant[1], "samples": SAMPLES,
                "model": blob.hex(), "x": x.tobytes().hex(), "outputs": peers,
            }
        )  # fmt: skip
    provenance = {
        "tool": "tools/make_resize_vectors.py",
        "peers": "ai_edge_litert 2.3.0 BUILTIN_REF; tflite_micro runtime (venv)",
        "layout": "x and outputs: int8 NHWC bytes, (samples, 1, H, W, C)",
    }
    OUT.write_text(json.dumps({"provenance": provenance, "cases": records}, indent=1) + "\n")
    print(f"{len(records)} cases -> {OUT}")


if __name__ == "__main__":
    main()
