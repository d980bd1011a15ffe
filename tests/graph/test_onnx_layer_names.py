"""Nodes are named by the PyTorch module that made them where the exporter recorded it in the
node's metadata (``pkg.torch.onnx.name_scopes``, or the older ``namespace``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import model, run_ort

from quantemu.graph import load_onnx


def _named(node, key: str, value: str):
    entry = node.metadata_props.add()
    entry.key, entry.value = key, value
    return node


def test_module_paths_from_name_scopes_and_namespace():
    scopes = "pkg.torch.onnx.name_scopes"
    nodes = [
        _named(
            helper.make_node("Relu", ["x"], ["a"], name="node_relu"),
            scopes,
            "['', 'layer1', 'layer1.0', 'layer1.0.act', 'relu']",
        ),
        # a second op of the same module keeps the FX node's name to stay unique
        _named(
            helper.make_node("Sigmoid", ["a"], ["b"], name="node_sigmoid"),
            scopes,
            "['', 'layer1', 'layer1.0', 'layer1.0.act', 'sigmoid']",
        ),
        _named(
            helper.make_node("Tanh", ["b"], ["c"], name="node_tanh"),
            "namespace",
            ": __main__.M/head: torch.nn.Tanh/tanh: aten.tanh.default",
        ),
        # a root-level op (no module) and a malformed entry keep the exporter's names
        _named(helper.make_node("Relu", ["c"], ["d"], name="node_relu_1"), scopes, "['', 'r']"),
        _named(helper.make_node("Relu", ["d"], ["y"], name="node_relu_2"), scopes, "[oops"),
    ]
    graph = load_onnx(model(nodes, {"x": (1, 4)}, ["y"]))
    assert [n.name for n in graph.nodes] == [
        "layer1.0.act",
        "layer1.0.act/sigmoid",
        "head",
        "node_relu_1",
        "node_relu_2",
    ]


def test_a_dynamo_export_is_named_by_its_modules(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")

    class Block(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(c, 4, 3, padding=1)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            return self.relu(self.conv1(x))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = torch.nn.Sequential(Block(3), Block(4))
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(self.layer1(x).mean((2, 3)))

    net = Net().eval()
    x = torch.randn(1, 3, 8, 8)
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, (x,), str(path), dynamo=True, verbose=False)
    graph = load_onnx(path)
    names = [n.name for n in graph.nodes]
    for expected in ("layer1.0.conv1", "layer1.0.relu", "layer1.1.conv1", "layer1.1.relu", "fc"):
        assert expected in names, names
    import onnx

    (want,) = run_ort(onnx.load(path), {graph.inputs[0].name: x.numpy()})
    got = graph.run_float({graph.inputs[0].name: x.numpy()})[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
