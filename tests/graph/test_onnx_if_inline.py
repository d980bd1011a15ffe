"""An If whose condition folds to a constant is replaced by the branch it takes, whose nodes may
read the enclosing graph's inputs and values; checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_models import assert_matches_ort, model, weights

from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx


def _branch(name: str, nodes, result: str):
    out = helper.make_tensor_value_info(result, TensorProto.FLOAT, None)
    return helper.make_graph(nodes, name, [], [out])


def _if_model(opset: int, *, channels: int = 3):
    # cond = (Shape(x)[1] == 3): known at import, as an exporter's rank or size check is.
    then_branch = _branch(
        "then",
        [
            helper.make_node("Conv", ["r", "w"], ["t0"]),  # reads an outer value and initializer
            helper.make_node("Add", ["t0", "half"], ["t1"]),
            helper.make_node("Constant", [], ["k"], value=helper.make_tensor("v", 1, [], [2.0])),
            helper.make_node("Mul", ["t1", "k"], ["t"]),
        ],
        "t",
    )
    else_branch = _branch("else", [helper.make_node("Tanh", ["x"], ["e"])], "e")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["c"], axis=0),
        helper.make_node("Equal", ["c", "three"], ["cond"]),
        helper.make_node("If", ["cond"], ["y0"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Sigmoid", ["y0"], ["y"]),
    ]
    inits = {
        "w": weights((2, 3, 1, 1)),
        "half": np.float32(0.5),
        "one": np.array(1, np.int64),
        "three": np.array(3, np.int64),
    }
    return model(nodes, {"x": (1, channels, 5, 5)}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
def test_the_taken_branch_is_inlined(opset):
    x = np.random.default_rng(0).normal(size=(1, 3, 5, 5)).astype(np.float32)
    graph = assert_matches_ort(_if_model(opset), {"x": x})
    assert [n.op_type for n in graph.nodes] == ["Relu", "Conv", "Add", "Mul", "Identity", "Sigmoid"]
    assert graph.nodes[1].name.startswith("If_4/then_branch/")


def test_the_else_branch_is_taken_when_the_condition_is_false():
    m = _if_model(13, channels=4)
    m.graph.initializer[0].CopyFrom(  # a weight of the other branch's shape, unused
        helper.make_tensor("w", TensorProto.FLOAT, [2, 4, 1, 1], np.ones(8, np.float32))
    )
    x = np.random.default_rng(1).normal(size=(1, 4, 5, 5)).astype(np.float32)
    graph = assert_matches_ort(m, {"x": x})
    assert [n.op_type for n in graph.nodes] == ["Relu", "Tanh", "Identity", "Sigmoid"]


def test_an_if_on_a_run_time_condition_stays_unsupported():
    m = _if_model(13)
    m.graph.node[3].CopyFrom(helper.make_node("Greater", ["x", "x"], ["cond"]))
    with pytest.raises(UnsupportedError, match="'If'"):
        load_onnx(m)
    graph = load_onnx(m, strict=False)
    assert "Unsupported" in [n.op_type for n in graph.nodes]
