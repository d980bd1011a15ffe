"""Unsupported operators: one error naming all of them, lenient import, collect-all lowering."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.registry import known_backends
from quantemu.errors import UnsupportedError
from quantemu.graph import SUPPORTED_OPS, UNSUPPORTED, load_onnx, optimize, unsupported_nodes
from quantemu.program.lowering import LoweringFailed

# Made-up op types, so that no operator added to quantemu later changes these tests.
FANCY, FROB = "FancyNorm", "Frobnicate"


def _model(*, value_info=False, extra=(), inits=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 6, 6])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node(FANCY, ["a"], ["b"], name="fancy"),
        helper.make_node(FROB, ["b"], ["c"], name="frob1"),
        helper.make_node(FROB, ["c"], ["d"], name="frob2"),
        *extra,
        helper.make_node("Add", ["d", "x"], ["y"], name="add"),
    ]
    infos = [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4, 6, 6])]
    graph = helper.make_graph(
        nodes, "g", [x], [y], list(inits), value_info=infos if value_info else None
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_strict_import_names_every_unsupported_operator_at_once():
    with pytest.raises(UnsupportedError) as info:
        load_onnx(_model())
    message = str(info.value)
    assert "3 node(s) of 2 operator type(s)" in message
    assert f"{FANCY} x1 (node 'fancy'): operator '{FANCY}' is not supported" in message
    assert f"{FROB} x2 (nodes 'frob1', 'frob2')" in message
    assert message.count("supported operators:") == 1 and "Conv" in message


def test_many_nodes_of_one_type_show_the_first_names_and_a_count():
    extra = [helper.make_node(FROB, ["d"], ["d2"], name="frob3")]
    extra += [helper.make_node(FROB, ["d2"], ["d3"], name="frob4")]
    model = _model(extra=extra)
    model.graph.node[-1].input[0] = "d3"
    with pytest.raises(UnsupportedError, match=r"Frobnicate x4 \(nodes 'frob1', 'frob2', 'frob3' "
                       r"and 1 more\)"):  # fmt: skip
        load_onnx(model)


def test_lenient_import_keeps_opaque_nodes():
    graph = load_onnx(_model(value_info=True), strict=False)
    assert [n.op_type for n in graph.nodes] == [
        "Relu",
        UNSUPPORTED,
        UNSUPPORTED,
        UNSUPPORTED,
        "Add",
    ]
    fancy = graph.nodes[1]
    assert dict(fancy.attrs) == {
        "onnx_op": FANCY,
        "reason": f"operator '{FANCY}' is not supported",
        "kind": "unknown operator",
        "output_shapes": (("N", 4, 6, 6),),  # from the file's value_info
    }
    assert graph.tensors["b"].shape == ("N", 4, 6, 6)
    assert graph.nodes[2].attrs["output_shapes"] == (("?",),)  # nothing says
    assert [n.name for n in unsupported_nodes(graph)] == ["fancy", "frob1", "frob2"]
    assert UNSUPPORTED not in SUPPORTED_OPS


def test_lenient_import_classifies_attributes_and_domains():
    conv_w = numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "w")
    extra = [
        helper.make_node("Conv", ["d", "w"], ["e"], name="conv", frobnicate=1),
        helper.make_node("Gelu", ["e"], ["f"], name="custom", domain="com.example"),
        helper.make_node("Relu", ["f"], ["g"], name="relu2"),
    ]
    model = _model(extra=extra, inits=[conv_w])
    model.graph.node[-1].input[0] = "g"
    graph = load_onnx(model, strict=False)
    kinds = {n.name: n.attrs["kind"] for n in unsupported_nodes(graph)}
    assert kinds["custom"] == "operator domain"
    # After an opaque node of unknown shape, a failure may be the shape's fault.
    assert kinds["conv"] in ("unsupported attribute or value", "unknown input shape")
    with pytest.raises(UnsupportedError) as info:
        load_onnx(model)
    assert "Gelu x1 (node 'custom'): operator domain 'com.example'" in str(info.value)


def test_an_opaque_node_has_no_float_kernel_and_is_not_folded():
    graph = load_onnx(_model(), strict=False)
    with pytest.raises(UnsupportedError, match=f"operator '{FANCY}' was not imported"):
        graph.run_float(np.zeros((1, 4, 6, 6), np.float32))
    const = numpy_helper.from_array(np.ones((1, 4, 6, 6), np.float32), "k")
    model = _model(inits=[const], extra=[])
    model.graph.node[1].input[0] = "k"  # FancyNorm of a constant: nothing to fold
    assert UNSUPPORTED in [n.op_type for n in optimize(load_onnx(model, strict=False)).nodes]


@pytest.mark.parametrize("backend", known_backends())
def test_every_backend_refuses_an_opaque_graph_naming_every_node(backend):
    graph = load_onnx(_model(), strict=False)
    calib = np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32)
    with pytest.raises(UnsupportedError) as info:
        quantemu.compile(graph, backend, calib=calib)
    message = str(info.value)
    assert message.startswith(f"{backend}: the model has 3 node(s)")
    assert FANCY in message and f"{FROB} x2" in message


def _div_lrn_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])
    # 3, not a power of two: Div by 2 becomes an exact Mul (passes_linear.div_by_constant)
    c = numpy_helper.from_array(np.full((1,), 3.0, np.float32), "c")
    nodes = [
        helper.make_node("Div", ["x", "c"], ["a"], name="div1"),
        helper.make_node("LRN", ["a"], ["b"], name="lrn", size=3),
        helper.make_node("Div", ["b", "c"], ["d"], name="div2"),
        helper.make_node("Tanh", ["d"], ["y"], name="tanh"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_lowering_names_every_blocking_node():
    graph = load_onnx(_div_lrn_model())
    calib = np.random.default_rng(0).random((2, 4, 8, 8)).astype(np.float32)
    with pytest.raises(LoweringFailed) as info:
        quantemu.compile(graph, "xs3", calib=calib)
    message = str(info.value)
    assert message.startswith("xs3: 3 nodes of 2 operator type(s) cannot be lowered:")
    assert "Div x2 (nodes 'div1', 'div2')" in message and "LRN x1 (node 'lrn')" in message
    assert message.count("supported operators") == 1
    failed = [node.name for node, _ in info.value.failures]
    assert failed == ["div1", "lrn", "div2"]
    assert [layer.name for layer in info.value.layers] == ["tanh"]


def test_nvdla_names_both_div_nodes_but_not_lrn_which_it_runs():
    graph = load_onnx(_div_lrn_model())
    calib = np.random.default_rng(0).random((2, 4, 8, 8)).astype(np.float32)
    with pytest.raises(LoweringFailed) as info:
        quantemu.compile(graph, "nvdla", calib=calib)
    # LRN runs on nvdla; both Div nodes block it
    assert (
        "Div x2 (nodes 'div1', 'div2')" in str(info.value)
        and "LRN" not in str(info.value).split("supported ops")[0]
    )


def test_a_node_further_after_an_opaque_one_may_fail_for_its_unknown_shape():
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node(FANCY, ["x"], ["a"], name="fancy"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("Conv", ["b", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    lenient = load_onnx(model, strict=False)
    assert [n.op_type for n in lenient.nodes] == [UNSUPPORTED, "Relu", UNSUPPORTED]
    assert lenient.nodes[2].attrs["kind"] == "unknown input shape"
    with pytest.raises(UnsupportedError) as info:  # the Conv is a consequence, not a finding
        load_onnx(model)
    assert f"operator '{FANCY}' is not supported" in str(info.value)
    assert "Conv" not in str(info.value).split("supported operators")[0]
