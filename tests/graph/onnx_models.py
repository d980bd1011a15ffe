"""Helpers for the graph tests: build small ONNX models with onnx.helper, run them both ways."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantemu.graph import load_onnx

ORT_REASON = "onnxruntime is in the test extra: pip install -e '.[test]'"


def ir_version(opset: int) -> int:
    """An IR version that onnxruntime accepts for ``opset`` (onnx's default may be newer)."""
    return 10 if opset >= 21 else 8


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, Sequence[int | str]],
    outputs: Sequence[str],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 13,
) -> onnx.ModelProto:
    """A model whose graph inputs are float32 with the given shapes; outputs of unknown shape."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version(opset)
    return m


def single(
    op: str, args: Sequence[Any], *, opset: int = 13, outputs: int = 1, seed: int = 0, **attrs
):
    """A one-node model and random feeds.

    Each entry of ``args`` is a shape (a graph input, fed random normal data), an array (an
    initializer), or ``""`` (an omitted optional input).
    """
    rng = np.random.default_rng(seed)
    inputs, inits, feeds, names = {}, {}, {}, []
    for i, arg in enumerate(args):
        name = f"in{i}"
        if isinstance(arg, str) and arg == "":
            names.append("")
            continue
        if isinstance(arg, np.ndarray):
            inits[name] = arg
        else:
            inputs[name] = list(arg)
            concrete = [d if isinstance(d, int) else 2 for d in arg]  # symbolic dims: 2
            feeds[name] = rng.normal(size=concrete).astype(np.float32)
        names.append(name)
    outs = [f"out{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_node", **attrs)
    return model([node], inputs, outs, inits, opset), feeds


def weights(shape: Sequence[int], seed: int = 1, scale: float | None = None) -> np.ndarray:
    """Random float32 weights scaled by 1/sqrt(fan-in) (outputs stay of order one)."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    std = scale if scale is not None else 1 / np.sqrt(max(fan_in, 1))
    return (np.random.default_rng(seed).normal(size=shape) * std).astype(np.float32)


def run_ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of onnxruntime's CPU provider."""
    ort = pytest.importorskip("onnxruntime", reason=ORT_REASON)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_matches_ort(m: onnx.ModelProto, feeds, *, rtol=1e-5, atol=1e-5, optimize=False):
    """quantemu's float executor agrees with onnxruntime on every output."""
    from quantemu.graph import optimize as run_pipeline

    expected = run_ort(m, feeds)
    graph = load_onnx(m)
    if optimize:
        graph = run_pipeline(graph)
    ours = graph.run_float(feeds)
    for name, want in zip(graph.outputs, expected, strict=True):
        got = ours[name]
        assert got.dtype == np.float32
        assert got.shape == want.shape, (name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)
        inferred = graph.tensors[name].shape  # shape inference agrees (symbolic dims aside)
        assert len(inferred) == want.ndim
        assert all(isinstance(d, str) or d == w for d, w in zip(inferred, want.shape, strict=True))
    return graph
