"""GELU on xs3's default (xformer) flow, as xcore-opt 1.4.2 treats it: the compiler keeps
TFLite's GELU, then fails to set up ("Didn't find op for builtin opcode 'GELU'"), and XMOS's host
interpreter has no GELU kernel either (recorded in tests/backends/tflite/gelu_peer_vectors.json by
tools/make_gelu_vectors.py). quantemu refuses the same model, naming Gelu and xcore-opt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import quantemu
from quantemu.errors import UnsupportedError

VECTORS = json.loads((Path(__file__).parents[1] / "tflite" / "gelu_peer_vectors.json").read_text())
MISSING = "Didn't find op for builtin opcode 'GELU'"


def _model(approximate: str):
    n = helper.make_node
    graph = helper.make_graph(
        [n("MatMul", ["x", "w"], ["h"]), n("Gelu", ["h"], ["y"], approximate=approximate)],
        "dense_gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            helper.make_tensor(
                "w", TensorProto.FLOAT, [16, 16], np.eye(16, dtype=np.float32).ravel()
            )
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


def test_peers_have_no_gelu():
    peers = VECTORS["peers_on_gelu"]
    assert peers["xcore_opt"]["returncode"] != 0
    for name in ("xcore_opt", "xmos_host_interpreter"):
        assert MISSING in peers[name]["messages"], name


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_xformer_refuses_naming_gelu_and_xcore_opt(approximate):
    calib = np.random.default_rng(1).uniform(-4, 3, (16, 16)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"'Gelu'.*xcore-opt 1\.4\.2 keeps GELU") as info:
        quantemu.compile(_model(approximate), "xs3", calib=calib)
    assert MISSING in str(info.value)
