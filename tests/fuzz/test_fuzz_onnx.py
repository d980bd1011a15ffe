"""Fuzz the ONNX importer: mutated and truncated bytes, and valid graphs with hostile attributes.

Whatever loads is also optimized, run in float, and (for some) compiled for onednn: every step
gives a result or a QuantemuError with a message (see fuzz_helpers).
"""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np
import onnx
from fuzz_helpers import FAST, mutated, outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.data import demo_model_path
from quantemu.graph.passes import optimize

DEMO = demo_model_path().read_bytes()


def _model(nodes, inputs, inits=(), opset=13) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


SMALL = [
    _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [("x", [1, 2, 5, 5])],
        [("w", np.ones((3, 2, 3, 3), np.float32))],
    ).SerializeToString(),
    _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Reshape", ["r", "s"], ["f"]),
            helper.make_node("Gemm", ["f", "w"], ["y"], transB=1),
        ],
        [("x", [2, 3, 4])],
        [("s", np.array([2, 12], np.int64)), ("w", np.ones((5, 12), np.float32))],
    ).SerializeToString(),
]


#: Graphs with a tensor of more elements (counting known dimensions) are not run: legal (a
#: mutated pad of thousands) but slow, and risky to allocate. Beyond HUGE elements allocation
#: fails at once, so those run: the executor must turn the MemoryError into a QuantemuError.
LARGE, HUGE = 1 << 20, 1 << 40


def _known_size(shape) -> int:
    return math.prod(d for d in shape if isinstance(d, int))


def _feed(graph) -> dict[str, np.ndarray] | None:
    rng = np.random.default_rng(0)
    feeds = {}
    for info in graph.inputs:
        shape = tuple(2 if isinstance(d, str) else d for d in info.shape)
        if any(not isinstance(d, int) or d < 0 for d in shape) or np.prod(shape) > 1 << 16:
            return None
        if not np.issubdtype(np.dtype(info.dtype), np.floating):
            return None
        feeds[info.name] = rng.standard_normal(shape).astype(info.dtype)
    return feeds


def _after_load(graph, *, compile_too: bool = False) -> None:
    """What a user does next with a loaded graph; each step keeps the invariant."""
    optimized = outcome(optimize, graph)
    feeds = _feed(graph)
    if feeds is None or any(LARGE < _known_size(i.shape) < HUGE for i in graph.tensors.values()):
        return
    outcome(graph.run_float, feeds)
    if optimized is not None:
        outcome(optimized.run_float, feeds)
    if compile_too and len(feeds) == 1:
        (calib,) = feeds.values()
        outcome(quantemu.compile, graph, "onednn", calib=calib, progress=False)


# --- bytes ---------------------------------------------------------------------------------------


@settings(**FAST)
@given(mutated(DEMO))
def test_mutated_demo_bytes(data: bytes) -> None:
    graph = outcome(quantemu.load_onnx, data)
    if graph is not None:
        _after_load(graph)


@settings(**FAST)
@given(st.sampled_from(SMALL).flatmap(mutated))
def test_mutated_small_model_bytes(data: bytes) -> None:
    graph = outcome(quantemu.load_onnx, data)
    if graph is not None:
        _after_load(graph, compile_too=True)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(DEMO))
def test_mutated_demo_path(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as out:
            out.write(data)
        graph = outcome(quantemu.load_onnx, path)
    if graph is not None:
        _after_load(graph)


@settings(**FAST)
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    outcome(quantemu.load_onnx, data)
