"""Record int8 TRANSPOSE_CONV golden vectors (issue 30).

    .venv/bin/python tools/make_transpose_conv_vectors.py

Needs ai-edge-litert (its flatbuffer schema and the BUILTIN_REF interpreter), tflite-micro and
xmos-ai-tools; no TensorFlow. Each case is a one-operator int8 model written here with LiteRT's
flatbuffer schema as TensorFlow's converter writes a Keras ``Conv2DTranspose``: inputs
``output_shape`` (int32 constant), the filter ``(C_out, kh, kw, C_in)`` int8 quantized per
output channel (axis 0, zero point 0), the input and an int32 bias at ``s_in * s_w[o]``;
``TransposeConvOptions`` with SAME or VALID padding, the strides and a fused activation
(operator version 1, which both runtimes take). Each case runs on seeded int8 inputs on LiteRT's
reference kernels, on TFLite-Micro and, compiled by xcore-opt (its operators recorded), on
XMOS's host interpreter. Writes ``tests/backends/tflite/transpose_conv_peer_vectors.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from ai_edge_litert import schema_py_generated as fb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_prelu_vectors import on_every_peer, write
from tflite_one_op import _Model, _quant, _serialize

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "backends" / "tflite" / "transpose_conv_peer_vectors.json"
SAMPLES = 2
#: (input H, W, C_in), C_out, kernel, strides, padding, output (H, W), activation.
GEOMETRIES = [
    ((4, 5, 3), 4, (3, 3), (2, 2), "SAME", (8, 10), "NONE"),
    ((4, 5, 3), 2, (3, 3), (2, 2), "VALID", (9, 11), "NONE"),
    ((3, 3, 8), 5, (4, 4), (2, 2), "SAME", (6, 6), "RELU"),
    ((5, 4, 2), 3, (2, 3), (1, 2), "SAME", (5, 8), "NONE"),
    ((2, 6, 4), 2, (3, 1), (3, 1), "VALID", (6, 6), "RELU6"),
    ((6, 6, 16), 8, (2, 2), (2, 2), "VALID", (12, 12), "NONE"),
    ((3, 4, 5), 6, (5, 5), (2, 2), "SAME", (6, 8), "NONE"),
    ((4, 4, 4), 4, (3, 3), (1, 1), "SAME", (4, 4), "NONE"),
]
_ACT = {"NONE": 0, "RELU": 1, "RELU6": 3}
_PADDING = {"SAME": fb.Padding.SAME, "VALID": fb.Padding.VALID}


def build(geometry, seed: int) -> tuple[bytes, dict]:
    """The model of one geometry and the quantization it was given."""
    (h, w, c_in), c_out, (kh, kw), (sh, sw), padding, (oh, ow), act = geometry
    rng = np.random.default_rng(seed)
    weights = rng.integers(-127, 128, (c_out, kh, kw, c_in)).astype(np.int8)
    s_w = rng.uniform(0.002, 0.02, c_out).astype(np.float32)
    s_in, z_in = float(np.float32(rng.uniform(0.01, 0.1))), int(rng.integers(-20, 20))
    bias = rng.integers(-3000, 3000, c_out).astype(np.int32)
    # the output scale from the accumulator's spread, so that codes fill the int8 range
    spread = 128 * float(np.sqrt(kh * kw * c_in / (sh * sw))) * 40
    s_out = float(np.float32(spread * s_in * float(s_w.mean()) / 127 * 2.0))
    z_out = int(rng.integers(-30, 30))
    m = _Model()
    size = np.array([1, oh, ow, c_out], np.int32)
    shape = m.tensor("output_shape", (4,), fb.TensorType.INT32, None, size)
    filt = m.tensor("filter", weights.shape, fb.TensorType.INT8, _quant(s_w, 0, 0), weights)
    x = m.tensor("input", (1, h, w, c_in), fb.TensorType.INT8, _quant(s_in, z_in))
    b_scale = (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32)
    b = m.tensor("bias", (c_out,), fb.TensorType.INT32, _quant(b_scale, 0), bias)
    y = m.tensor("output", (1, oh, ow, c_out), fb.TensorType.INT8, _quant(s_out, z_out))
    options = fb.TransposeConvOptionsT()
    options.padding, options.strideH, options.strideW = _PADDING[padding], sh, sw
    options.fusedActivationFunction = _ACT[act]
    operator = (fb.BuiltinOperator.TRANSPOSE_CONV, fb.BuiltinOptions.TransposeConvOptions, options)
    quant = {
        "input": [s_in, z_in], "output": [s_out, z_out], "weight_scales": s_w.tolist(),
        "filter_ohwi": weights.tobytes().hex(), "bias": bias.tolist(),
    }  # fmt: skip
    return _serialize(m, operator, [shape, filt, x, b], (x, y)), quant


def main() -> None:
    rng = np.random.default_rng(61)
    records = []
    for index, geometry in enumerate(GEOMETRIES):
        blob, quant = build(geometry, 60 + index)
        (h, w, c_in), c_out, kernel, strides, padding, output, act = geometry
        x = rng.integers(-128, 128, (SAMPLES, 1, h, w, c_in), dtype=np.int8)
        records.append(
            {
                "input_nhwc": [h, w, c_in], "out_channels": c_out, "kernel": list(kernel),
                "strides": list(strides), "padding": padding, "output_hw": list(output),
                "activation": act, **quant, **on_every_peer(blob, x),
            }
        )  # fmt: skip
    layout = "x and outputs: int8 NHWC bytes, (samples, 1, H, W, C); filter: int8 OHWI bytes"
    write(OUT, "tools/make_transpose_conv_vectors.py", records, layout)


if __name__ == "__main__":
    main()
