"""Whole int8 TFLite models on the ``tflite`` backend against LiteRT's reference kernels.

The public reference set (tests/data/models_xs3_public, a copy of
../shared/conformance/models/xs3) holds LiteRT BUILTIN_REF's outputs (``y_tflite_ref``) and every
intermediate tensor of the first inputs (``ref_NN`` in ``NAME.layers.npz``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.graph.tflite_import import load_tflite, nhwc_view

DATA = Path(__file__).resolve().parents[2] / "data" / "models_xs3_public"
MODELS = ("conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv")


@pytest.fixture(scope="module")
def manifest():
    return json.loads((DATA / "MANIFEST.json").read_text())


@pytest.mark.parametrize("name", MODELS)
def test_outputs_equal_litert_reference(name):
    data = np.load(DATA / f"{name}.npz")
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "tflite")
    result = program.run(data["x_int8"], keep="all")
    out = program.graph.outputs[0]
    assert np.array_equal(result.tensors[out].codes, data["y_tflite_ref"])
    assert np.array_equal(data["y_tflm"], data["y_tflite_ref"])  # the set's own claim


@pytest.mark.parametrize("name", MODELS)
def test_every_intermediate_tensor_equals_litert(name, manifest):
    layers = np.load(DATA / f"{name}.layers.npz")
    info = manifest["models"][name]["layers"]
    x = np.load(DATA / f"{name}.npz")["x_int8"][: info["n_inputs"]]
    graph = load_tflite(DATA / f"{name}.int8.tflite")
    program = quantemu.compile(graph, "tflite")
    tensors = program.run(x, keep="all").tensors
    checked = 0
    for ref in info["ref_tensors"]:
        ir = ref["name"]
        assert ir in tensors, ir
        got = nhwc_view(program.graph, ir, tensors[ir].codes)
        assert np.array_equal(got, layers[ref["key"]]), (name, ref["op"], ir)
        checked += 1
    assert checked == len(info["ref_tensors"]) > 0


FLOAT_IO = Path(__file__).resolve().parents[2] / "data" / "tflite_float_io"


@pytest.mark.parametrize(
    ("runtime", "key"), [("litert_reference", "y_tflite_ref"), ("tflite_micro", "y_tflm")]
)
def test_float_input_and_output_model(runtime, key):
    """QUANTIZE at the input, DEQUANTIZE at the output (tools/make_tflite_float_io.py): no
    calibration is needed, and the float outputs equal the runtime's exactly."""
    data = np.load(FLOAT_IO / "float_io.npz")
    program = quantemu.compile(FLOAT_IO / "float_io.int8.tflite", "tflite", runtime=runtime)
    assert program.header["calibration"] == "the model's own quantization"
    out = program.graph.outputs[0]
    assert np.array_equal(program.run(data["x"], keep="all").outputs[out], data[key])
