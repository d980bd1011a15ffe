"""A fused activation TFLite's int8 kernels lack (LeakyRelu after Conv/Gemm/Add) is written back
as its own LEAKY_RELU before calibration, as TensorFlow's converter keeps it: the tflite and xs3
(xformer) backends lower such models, and compute exactly what they compute when the graph
passes could not fuse it at all."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite.lower.unfuse import unfuse_activations
from quantemu.graph import load_onnx, optimize


def _model(path, *, expose_conv: bool = False) -> str:
    """Conv -> LeakyRelu(0.2) -> Conv; ``expose_conv`` makes the first conv's output a graph
    output too, so the graph passes cannot fuse the activation."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.normal(0, 0.3, (4, 8, 1, 1)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["l"], alpha=0.2),
        helper.make_node("Conv", ["l", "w2"], ["y"]),
    ]
    outputs = ["y", "c"] if expose_conv else ["y"]
    graph = helper.make_graph(
        nodes,
        "conv_leaky",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(path)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (6, 3, 8, 8)).astype(np.float32)


def test_leaky_relu_is_written_back_after_its_producer(tmp_path):
    graph = optimize(load_onnx(_model(tmp_path / "m.onnx")))
    conv = graph.nodes[0]
    assert conv.attrs["activation"] == "leaky_relu"  # what the graph passes give
    rewritten = unfuse_activations(graph)
    assert [n.op_type for n in rewritten.nodes] == ["Conv", "LeakyRelu", "Conv"]
    bare, leaky = rewritten.nodes[:2]
    assert "activation" not in bare.attrs and "activation_alpha" not in bare.attrs
    assert bare.outputs == (f"{conv.name}/pre_activation",) == leaky.inputs
    assert leaky.outputs == conv.outputs and leaky.attrs["alpha"] == pytest.approx(0.2)
    x = _x(1)
    np.testing.assert_array_equal(rewritten.run_float(x)["y"], graph.run_float(x)["y"])
    assert unfuse_activations(rewritten) is rewritten  # nothing left to write back


def test_relu_and_clip_stay_fused(tmp_path):
    graph = optimize(load_onnx(_model(tmp_path / "m.onnx")))
    conv = graph.nodes[0]
    attrs = conv.attrs.merged(activation="relu", activation_alpha=None)
    relu = graph.replace(nodes=(dataclasses.replace(conv, attrs=attrs), *graph.nodes[1:]))
    assert unfuse_activations(relu) is relu


@pytest.mark.parametrize(
    ("backend", "ops"),
    [
        ("tflite", ["CONV_2D", "LEAKY_RELU", "CONV_2D"]),
        ("xs3", ["XC_conv2d_v2", "XC_lookup", "XC_conv2d_v2"]),
    ],
)
def test_tflite_targets_run_it_as_if_never_fused(tmp_path, backend, ops):
    fused = quantemu.compile(_model(tmp_path / "a.onnx"), backend, calib=_x(2))
    apart = quantemu.compile(_model(tmp_path / "b.onnx", expose_conv=True), backend, calib=_x(2))
    assert [layer.op for layer in fused.lowered.layers] == ops
    pre = "Conv_0/pre_activation"
    # The pre-activation tensor was calibrated like the unfused model's conv output.
    assert fused.ranges.tensors[pre] == apart.ranges.tensors["c"]
    x = _x(3)
    got, want = fused.run(x, keep="all").tensors, apart.run(x, keep="all").tensors
    np.testing.assert_array_equal(got["y"].codes, want["y"].codes)
    np.testing.assert_array_equal(got[pre].codes, want["c"].codes)
