"""Writing the IR back to ONNX: loading the file again and lowering it gives every code of the
graph it was written from (fused activations are written as their nodes and fused again)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError
from quantemu.graph import Graph, TensorInfo
from quantemu.graph.ir import Attrs, Node
from quantemu.graph.onnx_export import save_onnx, to_onnx
from quantemu.graph.zoo import resnet18
from quantemu.simulate.plan import plan_model


@pytest.mark.parametrize("model", ["demo", "resnet"])
@pytest.mark.parametrize("backend", ["xs3", "nvdla", "onednn", "nnie", "tflite"])
def test_written_graph_lowers_to_the_same_codes(model, backend):
    rng = np.random.default_rng(0)
    if model == "demo":
        graph, calib, x = (
            quantemu.load_onnx(demo_model_path()),
            demo_dataset("calib")[0],
            demo_dataset("test")[0][:50],
        )
    else:
        graph = quantemu.load_onnx(resnet18(batch="N", size=32, width=8, num_classes=10))
        calib = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
        x = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
    plan = plan_model(graph, backend, calib)
    prepared, ranges = plan.graph, plan.ranges
    proto = to_onnx(prepared, {"quantemu.note": "kept"})
    onnx.checker.check_model(proto)
    again = quantemu.load_onnx(proto)
    assert again.metadata["quantemu.note"] == "kept"
    one = plan.lower().run(x, keep="all")
    two = quantemu.compile(again, backend, calibration=ranges).run(x, keep="all")
    assert one.tensors.keys() == two.tensors.keys()
    for name, tensor in one.tensors.items():
        assert np.array_equal(tensor.codes, two.tensors[name].codes), name


def test_fused_clip_and_leaky_relu_are_written_as_nodes():
    graph = Graph(
        "g",
        (TensorInfo("x", ("N", 4)),),
        ("y",),
        (
            Node(
                "mm",
                "MatMul",
                ("x", "w"),
                ("h",),
                Attrs({"activation": "clip", "activation_min": 0.0, "activation_max": 6.0}),
            ),
            Node(
                "add",
                "Add",
                ("h", "h"),
                ("y",),
                Attrs({"activation": "leaky_relu", "activation_alpha": 0.1}),
            ),
        ),
        {"w": np.eye(4, dtype=np.float32)},
    )
    proto = to_onnx(graph)
    assert [n.op_type for n in proto.graph.node] == ["MatMul", "Clip", "Add", "LeakyRelu"]
    x = np.array([[-3.0, 1.0, 4.0, 9.0]], np.float32)
    again = quantemu.load_onnx(proto)
    assert np.array_equal(again.run_float(x)["y"], graph.run_float(x)["y"])


def test_save_names_a_missing_directory(tmp_path):
    graph = quantemu.load_onnx(demo_model_path())
    with pytest.raises(InvalidInputError, match="does not exist"):
        save_onnx(graph, tmp_path / "no" / "m.onnx")
