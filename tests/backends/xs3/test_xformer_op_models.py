"""The xs3 backend (xformer path) on the int8 models of tests/data/tflite_refs whose operators
xcore-opt turns into XC_add, XC_lookup, XC_mean, XC_maxpool2d and the average pool's depthwise
XC_conv2d_v2: final outputs and every one of those layers' outputs against XMOS's host
interpreter (``y_xcore``, ``xcore_NN``; xmos-ai-tools 1.4.2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.graph.tflite_import import nhwc_view

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
MODELS = (
    "add",
    "add_relu",
    "sub",
    "add_channel_const",
    "maxpool_same",
    "maxpool_valid",
    "avgpool_same",
    "avgpool_valid",
    "mean_gap",
    "mean_gap_keepdims",
    "concat",  # TANH and an int8 -> int8 QUANTIZE as XC_lookup
    "logistic",
    "tanh",
    "relu",
    "relu6",
    "leaky_relu",
    "hard_swish",
    "mixed_mobilenet",
    "fallback_chain",
)
# layer op -> the op of the XMOS tensor it must equal (a fused lookup: the lookup's output)
CHECKED = {
    "XC_add": "XC_add",
    "XC_add+XC_lookup": "XC_lookup",
    "XC_lookup": "XC_lookup",
    "XC_mean": "XC_mean",
    "XC_maxpool2d": "XC_maxpool2d",
}


def _program(name: str):
    return quantemu.compile(DATA / f"{name}.int8.tflite", "xs3")


@pytest.mark.parametrize("name", MODELS)
def test_outputs_equal_xmos_host_interpreter(name):
    data = np.load(DATA / f"{name}.npz")
    program = _program(name)
    out = program.run(data["x_int8"], keep="all").tensors[program.graph.outputs[0]].codes
    assert np.array_equal(out.reshape(data["y_xcore"].shape), data["y_xcore"])


@pytest.mark.parametrize("name", MODELS)
def test_every_xc_layer_equals_the_interpreter(name):
    info = json.loads((DATA / "MANIFEST.json").read_text())["models"][name]["layers"]
    layers = np.load(DATA / f"{name}.layers.npz")
    program = _program(name)
    tensors = program.run(layers["x_int8"][: info["n_inputs"]], keep="all").tensors
    checked = 0
    for layer in program.lowered.layers:
        op = CHECKED.get(layer.op)
        if op is None and "AVERAGE_POOL_2D" in layer.note:
            op = "XC_conv2d_v2"
        if op is None:
            continue
        got = nhwc_view(program.graph, layer.output, tensors[layer.output].codes)
        theirs = [
            layers[t["key"]].reshape(got.shape)
            for t in info["xcore_tensors"]
            if t["op"] == op and int(np.prod(t["shape"][1:])) == got[0].size
        ]
        assert any(np.array_equal(got, t) for t in theirs), (name, layer.name, layer.op)
        checked += 1
    assert checked > 0


def test_avgpool_same_differs_from_tflite_at_the_borders():
    data = np.load(DATA / "avgpool_same.npz")
    assert not np.array_equal(data["y_xcore"], data["y_tflite_ref"])
