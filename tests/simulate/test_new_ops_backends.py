"""The operators of issue 15 on every backend: each either runs or refuses naming the operator.

Two small ONNX models: a transformer MLP block on (N, T, C) with LayerNormalization, Gelu, a
LayerNorm decomposed into Pow / Sqrt / Reciprocal (as older exporters write it) and an exact GELU
through Erf; and a convolution net with Pad, Squeeze and Unsqueeze. ``quantemu.compile`` and
``.run`` on every registered backend must produce outputs or raise UnsupportedError /
InvalidInputError that names one of the model's operators: never another exception.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from op_coverage import TARGET_IDS, TARGETS, assert_runs_or_names_an_operator

RNG = np.random.default_rng(7)


def _w(*shape, scale=0.3):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _model(nodes, x_shape, inits, opset):
    graph = helper.make_graph(
        nodes,
        "new_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset >= 21 else 9
    return m


def mlp_block() -> onnx.ModelProto:
    """LayerNorm -> Linear -> Gelu -> Linear, a residual, a decomposed LayerNorm, an Erf GELU."""
    c, hidden = 16, 32
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "w1"], ["h1"]),
        n("Add", ["h1", "b1"], ["h1b"]),
        n("Gelu", ["h1b"], ["g"], approximate="tanh"),
        n("MatMul", ["g", "w2"], ["h2"]),
        n("Add", ["h2", "x"], ["r"]),
        # LayerNorm as older exporters decompose it
        n("ReduceMean", ["r", "axes"], ["mu"], keepdims=1),
        n("Sub", ["r", "mu"], ["d"]),
        n("Pow", ["d", "two"], ["d2"]),
        n("ReduceMean", ["d2", "axes"], ["var"], keepdims=1),
        n("Add", ["var", "eps"], ["ve"]),
        n("Sqrt", ["ve"], ["sd"]),
        n("Reciprocal", ["sd"], ["inv"]),
        n("Mul", ["d", "inv"], ["z"]),
        # exact GELU through Erf
        n("Mul", ["z", "inv_sqrt2"], ["zs"]),
        n("Erf", ["zs"], ["e"]),
        n("Add", ["e", "one"], ["e1"]),
        n("Mul", ["z", "e1"], ["ze"]),
        n("Mul", ["ze", "half"], ["y"]),
    ]
    inits = {
        "ln_s": 1 + _w(c, scale=0.1),
        "ln_b": _w(c, scale=0.1),
        "w1": _w(c, hidden),
        "b1": _w(hidden, scale=0.1),
        "w2": _w(hidden, c),
        "axes": np.array([-1], np.int64),
        "two": np.float32(2.0),
        "eps": np.float32(1e-5),
        "inv_sqrt2": np.float32(1 / np.sqrt(2)),
        "one": np.float32(1.0),
        "half": np.float32(0.5),
    }
    return _model(nodes, ("N", 8, c), inits, opset=20)


def conv_pad_squeeze() -> onnx.ModelProto:
    """Pad -> Conv -> Relu -> GlobalAveragePool -> Squeeze -> Gemm -> Unsqueeze."""
    n = helper.make_node
    nodes = [
        n("Pad", ["x", "pads", "zero"], ["p"], mode="constant"),
        n("Conv", ["p", "cw", "cb"], ["c"], kernel_shape=[3, 3]),
        n("Relu", ["c"], ["r"]),
        n("GlobalAveragePool", ["r"], ["g"]),
        n("Squeeze", ["g", "sq_axes"], ["s"]),
        n("Gemm", ["s", "fw", "fb"], ["f"], transB=1),
        n("Unsqueeze", ["f", "unsq_axes"], ["y"]),
    ]
    inits = {
        "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "zero": np.float32(0.0),
        "cw": _w(8, 4, 3, 3),
        "cb": _w(8, scale=0.1),
        "sq_axes": np.array([2, 3], np.int64),
        "fw": _w(5, 8),
        "fb": _w(5, scale=0.1),
        "unsq_axes": np.array([1], np.int64),
    }
    return _model(nodes, ("N", 4, 8, 8), inits, opset=13)


MODELS = {
    "mlp_block": (mlp_block, (8, 16)),
    "conv_pad_squeeze": (conv_pad_squeeze, (4, 8, 8)),
}


# What must run (the rest may refuse, naming the operator): float fallbacks on onednn and on
# xs3's tflite2xcore flow; Pad / Squeeze / Unsqueeze wherever TFLite's PAD and RESHAPE exist.
MUST_RUN = {
    ("mlp_block", "onednn", ""),
    ("mlp_block", "xs3", "tflite2xcore"),
    ("conv_pad_squeeze", "onednn", ""),
    ("conv_pad_squeeze", "xs3", ""),
    ("conv_pad_squeeze", "xs3", "tflite2xcore"),
    ("conv_pad_squeeze", "tflite", ""),
}


@pytest.mark.parametrize(("backend", "options"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("name", list(MODELS))
def test_runs_or_names_the_operator(name, backend, options):
    build, sample = MODELS[name]
    must_run = (name, backend, options.get("toolchain", "")) in MUST_RUN
    assert_runs_or_names_an_operator(build(), sample, backend, options, must_run=must_run)
