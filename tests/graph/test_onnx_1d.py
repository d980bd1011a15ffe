"""1-D Conv, MaxPool and AveragePool (input (N, C, L)) import as the 2-D op on (N, C, 1, L)
between an Unsqueeze and a Squeeze (:mod:`quantemu.graph.onnx_lift_1d`): the float path equals
onnxruntime, and every backend lowers a PyTorch Conv1d model exported both ways."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, single, weights

from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx

X = (2, 3, 19)  # batch 2, 3 channels, odd length
W = weights

CONV = [
    ("basic", [X, W((5, 3, 3)), W((5,))], {"pads": [1, 1]}),
    ("stride_dilation_asym", [X, W((4, 3, 3))], {"strides": [2], "dilations": [2], "pads": [0, 2]}),
    ("group", [(1, 4, 17), W((6, 2, 5)), W((6,))], {"group": 2, "pads": [2, 2]}),
    ("depthwise", [(1, 4, 16), W((4, 1, 3))], {"group": 4, "strides": [2]}),
    ("same_upper", [X, W((4, 3, 4))], {"auto_pad": "SAME_UPPER", "strides": [2]}),
    ("same_lower", [X, W((4, 3, 4))], {"auto_pad": "SAME_LOWER"}),
    ("valid", [X, W((4, 3, 3))], {"auto_pad": "VALID"}),
    ("kernel_shape_given", [X, W((2, 3, 2))], {"kernel_shape": [2]}),
]
POOL = [
    ("MaxPool", {"kernel_shape": [3], "strides": [2]}),
    ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2], "dilations": [2], "pads": [1, 0]}),
    ("MaxPool", {"kernel_shape": [4], "strides": [3], "auto_pad": "SAME_LOWER"}),
    ("AveragePool", {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}),
    ("AveragePool", {"kernel_shape": [3], "pads": [1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [2], "auto_pad": "VALID"}),
]


@pytest.mark.parametrize("opset", [11, 17, 21])
@pytest.mark.parametrize(("args", "attrs"), [c[1:] for c in CONV], ids=[c[0] for c in CONV])
def test_conv_1d_matches_ort(args, attrs, opset):
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    graph = assert_matches_ort(*single("Conv", args, opset=opset, **attrs))
    assert [n.op_type for n in graph.nodes] == ["Unsqueeze", "Conv", "Squeeze"]


@pytest.mark.parametrize("opset", [11, 17, 21])
@pytest.mark.parametrize(("op", "attrs"), POOL, ids=[f"{o}-{sorted(a.items())}" for o, a in POOL])
def test_pool_1d_matches_ort(op, attrs, opset):
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    graph = assert_matches_ort(*single(op, [X], opset=opset, **attrs))
    assert [n.op_type for n in graph.nodes] == ["Unsqueeze", op, "Squeeze"]


def test_lifted_nodes_are_named_and_mapped():
    m, _ = single("Conv", [X, W((4, 3, 3))], strides=[2], dilations=[2], pads=[0, 2], group=1)
    graph = load_onnx(m)
    unsqueeze, conv, squeeze = graph.nodes
    assert (unsqueeze.name, conv.name, squeeze.name) == (
        f"{conv.name}/unsqueeze",
        conv.name,
        f"{conv.name}/squeeze",
    )
    assert unsqueeze.attrs["axes"] == (2,) and squeeze.attrs["axes"] == (2,)
    assert conv.inputs[0] == unsqueeze.outputs[0] and squeeze.inputs[0] == conv.outputs[0]
    assert squeeze.outputs == ("out0",)
    assert conv.attrs["kernel_shape"] == (1, 3) and conv.attrs["strides"] == (1, 2)
    assert conv.attrs["dilations"] == (1, 2) and conv.attrs["pads"] == (0, 0, 0, 2)
    assert graph.initializers[conv.inputs[1]].shape == (4, 3, 1, 3)


def test_shared_weight_gets_its_own_unsqueeze():
    """A weight that another node reads too keeps its 3-D value; the Conv reads its Unsqueeze,
    folded at import into a 4-D constant."""
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    w = W((3, 3, 3))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
        helper.make_node("Add", ["c", "w"], ["y"]),
    ]
    m = model(nodes, {"x": (1, 3, 3)}, ["y"], {"w": w})
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 3, 3)).astype(np.float32)}
    graph = assert_matches_ort(m, feeds)
    conv = next(n for n in graph.nodes if n.op_type == "Conv")
    assert graph.initializers[conv.inputs[1]].shape == (3, 3, 1, 3)
    assert graph.initializers["w"].shape == (3, 3, 3)


def test_quantized_weight_keeps_its_override():
    """A QDQ model's per-channel weight: reshaped in place, its integers and axis with it."""
    q = np.arange(-12, 12, dtype=np.int8).reshape(4, 2, 3)
    scale = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
        helper.make_node("Conv", ["x", "w"], ["y"]),
    ]
    inits = {"wq": q, "ws": scale, "wz": np.zeros(4, dtype=np.int8)}
    graph = load_onnx(model(nodes, {"x": (1, 2, 8)}, ["y"], inits))
    override = graph.quant_overrides["w"]
    assert override.axis == 0 and override.values.shape == (4, 2, 1, 3)
    assert np.array_equal(override.values[:, :, 0, :], q)
    assert graph.initializers["w"].shape == (4, 2, 1, 3)
    assert graph.tensors["y"].shape == (1, 4, 6)


def test_graph_input_weight_and_computed_weight():
    """A weight fed as a graph input is 1-D by its rank; one computed from computed values has
    no known rank before shapes are inferred, so the kernel_shape attribute says it."""
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    graph = assert_matches_ort(*single("Conv", [X, (4, 3, 3)], pads=[1, 1]))
    assert [n.op_type for n in graph.nodes] == ["Unsqueeze", "Unsqueeze", "Conv", "Squeeze"]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Relu", ["w"], ["v"]),
        helper.make_node("Conv", ["r", "v"], ["y"]),
    ]
    m = model(nodes, {"x": (1, 2, 8), "w": (4, 2, 3)}, ["y"])
    with pytest.raises(UnsupportedError, match="only 2-D Conv"):
        load_onnx(m)
    nodes[-1] = helper.make_node("Conv", ["r", "v"], ["y"], kernel_shape=[3])
    feeds = {k: np.ones(s, np.float32) for k, s in (("x", (1, 2, 8)), ("w", (4, 2, 3)))}
    assert_matches_ort(model(nodes, {"x": (1, 2, 8), "w": (4, 2, 3)}, ["y"]), feeds)


def _torch_model():
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 8, 5, padding=2)
            self.pool = torch.nn.MaxPool1d(2)
            self.fc = torch.nn.Linear(8 * 16, 10)

        def forward(self, x):
            return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))

    torch.manual_seed(0)
    return torch, Net().eval()


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_torch_conv1d_model_on_every_backend(tmp_path, dynamo):
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    import quantemu

    torch, net = _torch_model()
    path = tmp_path / "conv1d.onnx"
    x = torch.randn(1, 4, 32)
    torch.onnx.export(net, (x,), str(path), dynamo=dynamo, input_names=["x"])
    calib = np.random.default_rng(0).normal(size=(16, 4, 32)).astype(np.float32)
    graph = load_onnx(path)
    np.testing.assert_allclose(
        graph.run_float({"x": calib[:1]})[graph.outputs[0]],
        net(torch.from_numpy(calib[:1])).detach().numpy(),
        rtol=1e-4,
        atol=1e-5,
    )
    for backend in ("xs3", "nvdla", "onednn", "nnie", "tflite"):
        program = quantemu.compile(graph, backend, calib)
        program.run(calib[:2])
        inexact = {layer.op for layer in program.lowered.layers if not layer.exact}
        # NNIE's convolution and FC accumulate in an unpublished way (float, as in 2-D)
        assert not inexact or backend == "nnie", (backend, inexact)


def _bn_relu_model(torch):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 8, 5, padding=2)
            self.bn = torch.nn.BatchNorm1d(8)
            self.pool = torch.nn.MaxPool1d(2)
            self.conv2 = torch.nn.Conv1d(8, 6, 3)
            self.fc = torch.nn.Linear(6 * 14, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            return self.fc(torch.relu(self.conv2(x)).flatten(1))

    torch.manual_seed(0)
    net = Net()
    net.bn.running_mean.uniform_(-1, 1)
    net.bn.running_var.uniform_(0.5, 2)
    return net.eval()


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_batchnorm_and_relu_fold_into_the_1d_conv(tmp_path, dynamo):
    """sink_squeeze moves the Squeeze below BatchNorm1d and ReLU, which then fold and fuse
    into the Conv as in 2-D; a Squeeze meeting the pool's Unsqueeze cancels."""
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    from quantemu.graph import optimize

    torch = pytest.importorskip("torch")
    net = _bn_relu_model(torch)
    path = tmp_path / "conv1d_bn.onnx"
    torch.onnx.export(net, (torch.randn(1, 4, 32),), str(path), dynamo=dynamo, input_names=["x"])
    graph = optimize(load_onnx(path))
    ops = [n.op_type for n in graph.nodes]
    assert "BatchNormalization" not in ops and "Relu" not in ops, ops
    assert ops[:3] == ["Unsqueeze", "Conv", "MaxPool"], ops
    assert [n.attrs.get("activation") for n in graph.nodes if n.op_type == "Conv"] == ["relu"] * 2
    x = np.random.default_rng(2).normal(size=(3, 4, 32)).astype(np.float32)
    np.testing.assert_allclose(
        graph.run_float({"x": x})[graph.outputs[0]],
        net(torch.from_numpy(x)).detach().numpy(),
        rtol=1e-4,
        atol=1e-5,
    )


def test_quantized_conv1d_relu_on_onednn(tmp_path):
    """A QDQ Conv1d+ReLU (onnxruntime's quantizer puts the pair after the ReLU): the ReLU fuses
    into the Conv through the moved Squeeze, so PyTorch's quantized conv takes the pair."""
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    quantization = pytest.importorskip("onnxruntime.quantization")
    import quantemu

    torch, net = _torch_model()
    src, dst = tmp_path / "conv1d.onnx", tmp_path / "conv1d_qdq.onnx"
    torch.onnx.export(net, (torch.randn(1, 4, 32),), str(src), dynamo=False, input_names=["x"])
    calib = np.random.default_rng(0).normal(size=(8, 4, 32)).astype(np.float32)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": calib[i : i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.feeds, None)

    quantization.quantize_static(
        str(src), str(dst), Reader(), quant_format=quantization.QuantFormat.QDQ, per_channel=True,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8,
    )  # fmt: skip
    program = quantemu.compile(load_onnx(dst), "onednn", calib)
    assert program.run(calib[:2]).outputs[program.graph.outputs[0]].shape == (2, 10)
    assert all(layer.exact for layer in program.lowered.layers)
