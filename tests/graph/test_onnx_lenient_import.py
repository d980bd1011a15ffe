"""A lenient import (``strict=False``, what ``quantemu inspect`` uses) lists every node it
cannot import, whatever stops it: an unknown operator, a size left symbolic, a constant
computation that fails, a dynamically quantized model's operators."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import model

from quantemu.cli import main
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx
from quantemu.graph.ops.unsupported import unsupported_nodes


def _broken_model() -> onnx.ModelProto:
    nodes = [
        # auto_pad SAME on symbolic H, W
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], auto_pad="SAME_UPPER",
                         name="pool"),
        # a constant computation that fails: index 5 of a 2-vector
        helper.make_node("Gather", ["pair", "five"], ["bad"], axis=0, name="gather"),
        helper.make_node("Reshape", ["p", "bad"], ["r"], name="reshape"),
        # the operators of onnxruntime's dynamic quantization
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "qs", "qz"], name="dq"),
        helper.make_node("ConvInteger", ["q", "wq", "qz"], ["ci"], name="convint"),
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
    ]  # fmt: skip
    inits = {
        "pair": np.array([1, 2], np.int64),
        "five": np.array(5, np.int64),
        "wq": np.ones((2, 3, 1, 1), np.uint8),
    }
    return model(nodes, {"x": (1, 3, "H", "W")}, ["y", "r", "ci"], inits, opset=11)


def test_every_failing_node_is_listed_leniently():
    graph = load_onnx(_broken_model(), strict=False)
    listed = {n.name: n.attrs["onnx_op"] for n in unsupported_nodes(graph)}
    assert {"pool", "gather", "dq", "convint"} <= set(listed)
    assert listed["convint"] == "ConvInteger" and listed["dq"] == "DynamicQuantizeLinear"
    assert "relu" in [n.name for n in graph.nodes]


def test_strict_import_still_refuses():
    with pytest.raises((UnsupportedError, InvalidInputError), match=r"pool|gather"):
        load_onnx(_broken_model())


def test_inspect_lists_them_all(tmp_path, capsys):
    onnx.save(_broken_model(), tmp_path / "m.onnx")
    assert main(["inspect", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    for name in ("'pool'", "'gather'", "'dq'", "'convint'"):
        assert name in out, out
    assert "DynamicQuantizeLinear" in out and "ConvInteger" in out
