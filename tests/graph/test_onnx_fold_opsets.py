"""Constant folding at the model's own opset, and the constant chains exporters write for
shapes (Range, Cast, ConstantOfShape into a Concat), checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import assert_matches_ort, model


def _i64(*values):
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_unsqueeze_folds_at_the_models_opset(opset):
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch.onnx writes x.view(x.size(0), -1)
    # at opsets 9 to 12, where Unsqueeze takes its axes as an attribute (an input from 13 on).
    axes = (
        helper.make_node("Unsqueeze", ["g"], ["u"], axes=[0])
        if opset < 13
        else helper.make_node("Unsqueeze", ["g", "zero1"], ["u"])
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["g"], axis=0),
        axes,
        helper.make_node("Concat", ["u", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "minus1": _i64(-1), "zero1": _i64(0)}
    m = model(nodes, {"x": (2, 3, 4, 4)}, ["y"], inits, opset=opset)
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 4)).astype(np.float32)
    graph = assert_matches_ort(m, {"x": x})
    assert [n.op_type for n in graph.nodes] == ["Reshape"]


@pytest.mark.parametrize("opset", [11, 13])
def test_range_cast_concat_give_a_reshape_target(opset):
    # A target built as exporters write one: Range of constants, a float constant Cast to
    # int64, ConstantOfShape, concatenated into one int64 vector: (1, 1, 12, -1).
    one = helper.make_tensor("one", 7, [1], [1])  # 7: INT64
    nodes = [
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),  # [1]
        helper.make_node("ConstantOfShape", ["len1"], ["k"], value=one),  # [1]
        helper.make_node("Cast", ["half"], ["c"], to=7),  # [12]
        helper.make_node("Concat", ["r", "k", "c", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = {
        "start": np.array(1, np.int64),
        "limit": np.array(2, np.int64),
        "delta": np.array(1, np.int64),
        "half": np.array([12.0], np.float32),
        "minus1": _i64(-1),
        "len1": _i64(1),
    }
    m = model(nodes, {"x": (1, 3, 8)}, ["y"], inits, opset=opset)
    x = np.random.default_rng(1).normal(size=(1, 3, 8)).astype(np.float32)
    graph = assert_matches_ort(m, {"x": x})
    assert [n.op_type for n in graph.nodes] == ["Reshape"]
