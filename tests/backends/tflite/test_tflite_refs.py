"""The ``tflite`` backend on the operator references of tests/data/tflite_refs (made by
tools/make_tflite_refs.py with TensorFlow 2.17, LiteRT 2.3 and TFLite-Micro): every output code
and every intermediate tensor, for both runtimes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph.tflite_import import load_tflite, nhwc_view

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
MODELS = sorted(MANIFEST["models"])


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    ("runtime", "key"), [("litert_reference", "y_tflite_ref"), ("tflite_micro", "y_tflm")]
)
def test_outputs(name, runtime, key):
    data = np.load(DATA / f"{name}.npz")
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "tflite", runtime=runtime)
    got = program.run(data["x_int8"], keep="all").tensors[program.graph.outputs[0]].codes
    assert np.array_equal(got, data[key])


PUBLIC = Path(__file__).resolve().parents[2] / "data" / "models_xs3_public"
ON_INT8 = [(DATA, n) for n in MODELS] + [
    (PUBLIC, n) for n in ("conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv")
]


@pytest.mark.parametrize(("folder", "name"), ON_INT8, ids=[f"{f.name}/{n}" for f, n in ON_INT8])
def test_xmos_runtime_on_the_uncompiled_model(folder, name):
    """``y_xcore_on_int8``: XMOS's runtime on the int8 model xcore-opt did not compile."""
    data = np.load(folder / f"{name}.npz")
    if "y_xcore_on_int8" not in data.files:
        # XMOS's runtime crashed on the model (MANIFEST notes): quantemu must refuse the
        # operator it named (HARD_SWISH's crash named none).
        note = MANIFEST["models"][name]["notes"]["y_xcore_on_int8"]
        missing = re.search(r"builtin opcode '(\w+)'", note)
        assert missing is not None or name == "hard_swish", note
        if missing is not None:
            with pytest.raises(UnsupportedError, match=missing.group(1)):
                quantemu.compile(
                    folder / f"{name}.int8.tflite", "tflite", runtime="xmos_tflite_micro"
                )
        return
    program = quantemu.compile(
        folder / f"{name}.int8.tflite", "tflite", runtime="xmos_tflite_micro"
    )
    got = program.run(data["x_int8"], keep="all").tensors[program.graph.outputs[0]].codes
    assert np.array_equal(got, data["y_xcore_on_int8"])


@pytest.mark.parametrize("name", MODELS)
def test_intermediates(name):
    info = MANIFEST["models"][name]["layers"]
    layers = np.load(DATA / f"{name}.layers.npz")
    x = np.load(DATA / f"{name}.npz")["x_int8"][: info["n_inputs"]]
    program = quantemu.compile(load_tflite(DATA / f"{name}.int8.tflite"), "tflite")
    tensors = program.run(x, keep="all").tensors
    for ref in info["ref_tensors"]:
        got = nhwc_view(program.graph, ref["name"], tensors[ref["name"]].codes)
        assert np.array_equal(got, layers[ref["key"]].reshape(got.shape)), (name, ref["op"])


def test_the_set_covers_the_issue_operators():
    ops = {op for m in MANIFEST["models"].values() for op in m["int8_ops"]}
    wanted = {
        "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "MAX_POOL_2D",
        "AVERAGE_POOL_2D", "MEAN", "RESHAPE", "PAD", "CONCATENATION", "SOFTMAX", "LOGISTIC",
        "TANH", "RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH", "QUANTIZE",
    }  # fmt: skip
    assert wanted <= ops, wanted - ops
