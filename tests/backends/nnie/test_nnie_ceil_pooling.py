"""NNIE pools with Caffe's ceil rounding: a floor-mode pool whose size ceil changes is simulated
at NNIE's size (the whole network after it too), and the header says so; other backends keep
the model's floor sizes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu


def _model(path, kernel: int, stride: int, pad: int) -> str:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], kernel_shape=[kernel, kernel], strides=[stride, stride],
            pads=[pad] * 4, name="pool",
        ),
        helper.make_node("Conv", ["p1", "w2"], ["y"], pads=[1, 1, 1, 1], name="conv2"),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def _x(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 32, 32)).astype(np.float32)


def test_floor_pool_runs_at_nnies_ceil_size(tmp_path):
    path = _model(tmp_path / "m.onnx", kernel=3, stride=2, pad=1)  # ResNet's stem pool
    program = quantemu.compile(path, "nnie", calib=_x(4, 1))
    pool = program.graph.node("pool")
    assert pool.attrs["ceil_mode"] == 1
    assert program.graph.tensors["y"].shape[2:] == (17, 17)
    header = program.lowered.header["pooling"]
    assert "pool: 16x16 -> 17x17" in header and "NNIE's" in header
    result = program.run(_x(2, 2))
    assert result.tensors["y"].codes.shape == (2, 8, 17, 17)
    # the float reference runs the same network, so the per-layer comparison lines up
    evaluation = program.evaluate(_x(3, 3))
    assert [layer.name for layer in evaluation.layers]


def test_other_backends_keep_the_models_floor_size(tmp_path):
    path = _model(tmp_path / "m.onnx", kernel=3, stride=2, pad=1)
    program = quantemu.compile(path, "onednn", calib=_x(4, 1))
    assert program.graph.tensors["y"].shape[2:] == (16, 16)
    assert "pooling" not in program.lowered.header


@pytest.mark.parametrize(("kernel", "stride", "pad"), [(2, 2, 0), (3, 1, 1)])
def test_pools_where_floor_and_ceil_agree_are_left_alone(tmp_path, kernel, stride, pad):
    path = _model(tmp_path / "m.onnx", kernel=kernel, stride=stride, pad=pad)
    graph = quantemu.load_onnx(path)
    assert quantemu.prepare(graph, "nnie").node("pool").attrs["ceil_mode"] == 0
    program = quantemu.compile(path, "nnie", calib=_x(4, 1))
    assert "pooling" not in program.lowered.header
