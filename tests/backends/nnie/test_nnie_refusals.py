"""What NNIE's toolchain cannot take, refused with its reason (never a float stand-in)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx
from tests.graph.onnx_models import model, weights


def _conv_then(op: str):
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node(op, ["c"], ["y"], name=op.lower()),
    ]
    inits = {"w": weights((4, 3, 3, 3))}
    return load_onnx(model(nodes, {"x": ["N", 3, 5, 5]}, ["y"], inits, opset=14))


@pytest.mark.parametrize(
    ("op", "layer"), [("HardSwish", "hard-swish"), ("HardSigmoid", "hard-sigmoid")]
)
def test_hard_activations_refused_with_the_mappers_reason(op, layer):
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 5)).astype(np.float32)
    with pytest.raises(UnsupportedError) as info:
        quantemu.compile(_conv_then(op), "nnie", x)
    message = str(info.value)
    assert f"{op} '{op.lower()}'" in message
    assert f"Caffe layers, which have no {layer} layer" in message
    assert "deploy_nnie.py" in message
