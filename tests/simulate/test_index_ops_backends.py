"""Gather, Slice, Split, Expand, Where and a folded shape sub-graph on every backend: each model
runs, or its refusal names one of the model's operators (never another exception); where a
backend moves codes for Gather/Slice/Expand, the result is checked against its float model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from op_coverage import TARGET_IDS, TARGETS, assert_runs_or_names_an_operator

import quantemu
from quantemu.graph import load_onnx
from quantemu.graph.executor import run_node

RNG = np.random.default_rng(11)
N = helper.make_node


def _w(*shape, scale=0.3):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _i64(*values):
    return np.array(values, np.int64)


def _model(nodes, x_shape, inits, opset):
    graph = helper.make_graph(
        nodes,
        "index_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def conv_select() -> onnx.ModelProto:
    """Conv -> Relu -> Slice (channels) -> Gather (rows) -> Split -> Concat -> Slice -> Expand
    -> a Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain (view(b, -1)) -> Gemm."""
    nodes = [
        N("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c"], ["r"]),
        N("Slice", ["r", "s_starts", "s_ends", "s_axes"], ["rs"]),
        N("Gather", ["rs", "rows"], ["g"], axis=2),
        N("Split", ["g", "split"], ["g1", "g2"], axis=1),
        N("Concat", ["g2", "g1"], ["gc"], axis=1),
        N("Slice", ["gc", "c_starts", "c_ends", "c_axes", "c_steps"], ["col"]),
        N("Expand", ["col", "e_shape"], ["e"]),
        N("Shape", ["e"], ["shape"]),
        N("Gather", ["shape", "zero"], ["batch"], axis=0),
        N("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        N("Concat", ["batch1", "minus1"], ["target"], axis=0),
        N("Reshape", ["e", "target"], ["f"]),
        N("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    inits = {
        "cw": _w(8, 4, 3, 3),
        "cb": _w(8, scale=0.1),
        "s_starts": _i64(1),
        "s_ends": _i64(7),
        "s_axes": _i64(1),
        "rows": _i64(0, 2, -2),
        "split": _i64(2, 4),
        "c_starts": _i64(-1),  # the last column, read backwards
        "c_ends": _i64(-2),
        "c_axes": _i64(3),
        "c_steps": _i64(-1),
        "e_shape": _i64(1, 1, 1, 4),
        "zero": np.array(0, np.int64),
        "ax0": _i64(0),
        "minus1": _i64(-1),
        "fw": _w(4, 72),
        "fb": _w(4, scale=0.1),
    }
    return _model(nodes, ("N", 4, 8, 8), inits, opset=13)


def masked_tokens() -> onnx.ModelProto:
    """Linear -> Split (q, k) -> Where (constant mask) -> Mul -> Gather (tokens) -> Linear."""
    mask = RNG.random((8, 12)) > 0.3
    nodes = [
        N("MatMul", ["x", "w1"], ["h"]),
        N("Split", ["h"], ["q", "k"], axis=-1, num_outputs=2),
        N("Where", ["mask", "q", "fill"], ["qm"]),
        N("Mul", ["qm", "k"], ["p"]),
        N("Gather", ["p", "tokens"], ["t"], axis=1),
        N("MatMul", ["t", "w2"], ["y"]),
    ]
    inits = {
        "w1": _w(16, 24),
        "mask": mask,
        "fill": np.float32(0.0),
        "tokens": _i64(0, -1, 3),
        "w2": _w(12, 5),
    }
    return _model(nodes, ("N", 8, 16), inits, opset=18)


MODELS = {"conv_select": (conv_select, (4, 8, 8)), "masked_tokens": (masked_tokens, (8, 16))}
# Gather / Slice / Expand move codes on every backend: the convolution net runs everywhere it
# ran before (its float fallbacks aside); onednn runs Where as a float fallback.
MUST_RUN = {
    ("conv_select", "onednn", ""),
    ("conv_select", "xs3", ""),
    ("conv_select", "xs3", "tflite2xcore"),
    ("conv_select", "tflite", ""),
    ("conv_select", "nvdla", ""),
    ("conv_select", "nnie", ""),
    ("masked_tokens", "onednn", ""),
}


@pytest.mark.parametrize(("backend", "options"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("name", list(MODELS))
def test_runs_or_names_the_operator(name, backend, options):
    build, sample = MODELS[name]
    must_run = (name, backend, options.get("toolchain", "")) in MUST_RUN
    assert_runs_or_names_an_operator(build(), sample, backend, options, must_run=must_run)


@pytest.mark.parametrize(
    ("backend", "options"), TARGETS, ids=[b + "-".join(["", *o.values()]) for b, o in TARGETS]
)
def test_moves_are_exact_on_codes(backend, options):
    """Each Gather / Slice (Split) / Expand output holds its input's codes, moved as the float
    kernel moves values, with the input's encoding."""
    model = conv_select()
    calib = np.random.default_rng(1).normal(size=(16, 4, 8, 8)).astype(np.float32)
    x = np.random.default_rng(2).normal(size=(2, 4, 8, 8)).astype(np.float32)
    result = quantemu.compile(model, backend, calib=calib, **options).run(x, keep="all")
    graph = load_onnx(model)
    checked = 0
    for node in graph.nodes:
        if node.op_type not in ("Gather", "Slice", "Expand"):
            continue
        source, moved = result.tensors[node.inputs[0]], result.tensors[node.outputs[0]]
        np.testing.assert_array_equal(moved.codes, run_node(node, [source.codes])[0])
        assert moved.encoding == source.encoding
        checked += 1
    assert checked == 6  # Slice, Gather, the two Slices of Split, Slice, Expand
