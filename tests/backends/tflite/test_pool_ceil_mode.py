"""ceil_mode pooling (PyTorch's ``ceil_mode=True``, SqueezeNet) on the TFLite-based targets."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper

import quantemu
from quantemu.errors import UnsupportedError


def _pool(op: str, **extra):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node(
        op, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, **extra
    )
    graph = helper.make_graph([node], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


DATA = np.random.default_rng(0).normal(size=(6, 4, 8, 8)).astype(np.float32)


@pytest.mark.parametrize("backend", ["tflite", "xs3"])
def test_max_pool_ceil_mode_is_the_max_of_the_in_image_codes(backend):
    program = quantemu.compile(_pool("MaxPool"), backend, calib=DATA)
    result = program.run(DATA, keep="all")
    y, x = result.tensors["y"].codes, result.tensors["x"].codes.astype(np.int64)
    assert y.shape == (6, 4, 4, 4)  # one more window than floor mode
    padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-999)
    want = sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-2, -1))
    assert np.array_equal(y, want)


def test_average_pool_ceil_mode_on_tflite_and_refused_on_xs3():
    model = _pool("AveragePool", count_include_pad=0)
    program = quantemu.compile(model, "tflite", calib=DATA)
    result = program.run(DATA, keep="all")
    y, x = result.tensors["y"].codes, result.tensors["x"].codes.astype(np.int64)
    # TFLite's average: the in-image taps' sum over their count, rounded half away from zero
    windows = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1))), (3, 3), axis=(2, 3))[
        :, :, ::2, ::2
    ]
    inside = sliding_window_view(np.pad(np.ones((8, 8), np.int64), ((0, 1), (0, 1))), (3, 3))[
        ::2, ::2
    ]
    total, count = windows.sum(axis=(-2, -1)), inside.sum(axis=(-2, -1))
    want = np.sign(total) * ((np.abs(total) + count // 2) // count)
    assert np.array_equal(y, want)
    with pytest.raises(UnsupportedError, match="ceil_mode average pooling"):
        quantemu.compile(model, "xs3", calib=DATA)
