"""The xs3 backend (xformer path) on whole int8 TFLite models against XMOS's host interpreter.

``y_xcore`` and the ``xcore_NN`` intermediates of tests/data/models_xs3_public come from
xmos-ai-tools 1.4.2 (xcore-opt, then TFLMHostInterpreter on the compiled model).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.backends.xs3.xformer.lower.conv import XcConv2dLayer
from quantemu.graph.tflite_import import nhwc_view

DATA = Path(__file__).resolve().parents[2] / "data" / "models_xs3_public"
MODELS = ("conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv")


@pytest.mark.parametrize("name", MODELS)
def test_outputs_equal_xmos_host_interpreter(name):
    data = np.load(DATA / f"{name}.npz")
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "xs3")
    out = program.run(data["x_int8"], keep="all").tensors[program.graph.outputs[0]].codes
    assert np.array_equal(out, data["y_xcore"])
    # and the two targets really differ on these models (2-34 % of the codes)
    assert not np.array_equal(data["y_xcore"], data["y_tflite_ref"])


@pytest.mark.parametrize("name", MODELS)
def test_every_xc_conv_output_equals_the_interpreter(name):
    info = json.loads((DATA / "MANIFEST.json").read_text())["models"][name]["layers"]
    layers = np.load(DATA / f"{name}.layers.npz")
    x = np.load(DATA / f"{name}.npz")["x_int8"][: info["n_inputs"]]
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "xs3")
    tensors = program.run(x, keep="all").tensors
    ours = [layer for layer in program.lowered.layers if isinstance(layer, XcConv2dLayer)]
    theirs = [t for t in info["xcore_tensors"] if t["op"] == "XC_conv2d_v2"]
    assert len(ours) == len(theirs) > 0
    for layer, ref in zip(ours, theirs, strict=True):
        got = nhwc_view(program.graph, layer.output, tensors[layer.output].codes)
        want = layers[ref["key"]].reshape(got.shape[0], *ref["shape"][1:])
        channels = got.shape[-1]  # xformer pads channels to a multiple of 4, then slices
        want = want.reshape(*got.shape[:-1], -1)[..., :channels]
        assert np.array_equal(got, want), (name, layer.name)


def test_device_variant_truncates_vlashr():
    data = np.load(DATA / "conv_relu_stack.npz")
    host = quantemu.compile(DATA / "conv_relu_stack.int8.tflite", "xs3")
    device = quantemu.compile(DATA / "conv_relu_stack.int8.tflite", "xs3", model="device")
    assert device.header["vlashr"] != host.header["vlashr"]
    a, b = (
        p.run(data["x_int8"][:2], keep="all").tensors[p.graph.outputs[0]].codes
        for p in (host, device)
    )
    assert a.shape == b.shape  # the device variant is a documented, unverified alternative


def test_options_of_the_other_toolchain_are_errors():
    from quantemu.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="toolchain=tflite2xcore"):
        quantemu.compile(DATA / "mlp.int8.tflite", "xs3", symmetric_saturation=True)
    with pytest.raises(InvalidInputError, match="xcore-opt's"):
        quantemu.compile(
            DATA / "mlp.int8.tflite", "xs3", toolchain="tflite2xcore", conv_err_threshold=0.5
        )
