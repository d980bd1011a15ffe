"""What nvdla/sw's compiler refuses, refused with its own reason in both precisions."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx


def _activation(op: str):
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[1, 1]),
        helper.make_node(op, ["m"], ["y"], name=op.lower()),
    ]
    return load_onnx(model(nodes, {"x": ["N", 3, 4, 4]}, ["y"], opset=14))


@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize(
    ("op", "layer"), [("HardSwish", "hard-swish"), ("HardSigmoid", "hard-sigmoid")]
)
def test_hard_activations_refused_with_the_parsers_reason(op, layer, precision):
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 4)).astype(np.float32)
    with pytest.raises(UnsupportedError) as info:
        quantemu.compile(_activation(op), "nvdla", x, precision=precision)
    message = str(info.value)
    assert f"{op} '{op.lower()}'" in message
    assert f"Caffe parser has no {layer} layer" in message
    assert "could not parse layer type" in message
