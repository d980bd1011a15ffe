"""``quantemu inspect``: models with unimportable operators, and the ``--support`` table."""

from __future__ import annotations

import dataclasses

import onnx
import pytest
from onnx import TensorProto, helper

from quantemu.backends import registry
from quantemu.backends.registry import backend_spec, known_backends
from quantemu.cli import main
from quantemu.data import demo_model_path
from quantemu.graph import load_onnx, optimize
from quantemu.simulate.support import support_table


@pytest.fixture
def partial_model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 6, 6])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("FancyNorm", ["a"], ["b"], name="fancy"),
        helper.make_node("Frobnicate", ["b"], ["c"], name="frob1"),
        helper.make_node("Frobnicate", ["c"], ["d"], name="frob2"),
        helper.make_node("Add", ["d", "x"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    path = tmp_path / "partial.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_inspect_shows_a_model_with_unimportable_operators(partial_model, capsys):
    assert main(["inspect", str(partial_model)]) == 0
    out = capsys.readouterr().out
    assert "Unsupported" in out and "5 nodes" in out
    assert "3 node(s) could not be imported" in out
    assert "Frobnicate x2 (nodes 'frob1', 'frob2')" in out and "--support" in out


def test_support_table_of_a_partial_model(partial_model, capsys):
    assert main(["inspect", str(partial_model), "--support"]) == 0
    out = capsys.readouterr().out
    assert "support per backend" in out
    for backend in known_backends():
        assert backend in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert rows["FancyNorm"].count("unsupported") == len(known_backends())
    assert rows["Relu"].count("exact") == len(known_backends())
    assert "placeholder range" in out


def test_support_table_of_the_demo_model():
    table = support_table(optimize(load_onnx(demo_model_path())))
    assert table.op_types()[0] == "Conv" and not table.errors
    for backend in ("xs3", "nvdla", "onednn"):
        assert {table.cell(op, backend) for op in table.op_types()} == {"exact"}
    assert table.ranges == "2 random samples"


def test_a_backend_that_fails_as_a_whole_is_a_row(monkeypatch):
    def broken(graph, ranges, options):
        raise TypeError("boom")

    broken_spec = dataclasses.replace(backend_spec("nvdla"), lower=broken)
    monkeypatch.setitem(registry._BACKENDS, "nvdla", broken_spec)
    table = support_table(optimize(load_onnx(demo_model_path())), ["nvdla"])
    assert table.errors == {"nvdla": "TypeError: boom"}
    assert table.cell("Conv", "nvdla") == "error"


def test_support_table_of_a_dynamically_quantized_model(tmp_path):
    """onnxruntime's quantize_dynamic writes DynamicQuantizeLinear/ConvInteger/MatMulInteger,
    which no backend runs: each backend names them, none fails as a whole (a multi-output
    opaque node left onednn without the encoding of its second output: a KeyError)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    path = tmp_path / "dynamic.onnx"
    quantization.quantize_dynamic(str(demo_model_path()), str(path))
    table = support_table(load_onnx(path, strict=False))
    assert table.errors == {}
    for op in ("DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"):
        assert {table.cell(op, b) for b in table.backends} == {"unsupported"}
