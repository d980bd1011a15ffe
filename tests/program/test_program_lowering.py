"""The shared lowering machinery: context, rule table, float fallback, the registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from quantemu.backends.registry import backend_spec, backend_specs, known_backends
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node, TensorInfo
from quantemu.program import LayerOutput, LinearEncoding, QTensor
from quantemu.program.fallback import FloatFallbackLayer, node_constants
from quantemu.program.layer import Layer
from quantemu.program.lowering import LoweringContext, NotLowerable, RuleTable
from quantemu.program.options import LoweringOptions

ENC = LinearEncoding(scale=0.25, zero_point=0, dtype="int8")


@dataclass(frozen=True)
class ToyOptions(LoweringOptions):
    backend: ClassVar[str] = "toy"


@dataclass
class ToyContext(LoweringContext):
    backend: ClassVar[str] = "toy"
    fallback_allowed: bool = True

    def allows_fallback(self) -> bool:
        return self.fallback_allowed


@dataclass(frozen=True, kw_only=True)
class Copy(Layer):
    encoding: LinearEncoding

    def compute(self, inputs):
        return LayerOutput(QTensor(inputs[0].codes, self.encoding))


def _graph() -> Graph:
    nodes = [
        Node("relu", "Relu", ("x",), ("a",), {}),
        Node("add", "Add", ("a", "bias"), ("b",), {}),
        Node("soft", "Softmax", ("b",), ("c",), {"axis": -1}),
    ]
    return Graph(
        name="toy",
        inputs=(TensorInfo("x", ("N", 4)),),
        outputs=("c",),
        nodes=nodes,
        initializers={"bias": np.full((4,), 0.5, np.float32)},
    )


def _relu(ctx, node):
    return ctx.layer(Copy, node, op="copy", encoding=ENC)


def _add(ctx, node):
    ctx.constant(node, 0, "first operand")  # a run-time tensor: not lowerable
    raise AssertionError("unreachable")


def _fallback(ctx, node, why):
    return ctx.layer(
        FloatFallbackLayer,
        node,
        op=f"float:{node.op_type}",
        exact=False,
        note=why,
        node=node,
        encoding=ENC,
        constants=node_constants(ctx.graph.initializers, node),
    )


TABLE = RuleTable(
    rules={"Relu": _relu, "Add": _add}, fallback=_fallback, fallback_ops={"Softmax": "no LUT"}
)


def test_rules_fallbacks_and_the_driver_loop():
    ctx = ToyContext(_graph(), {}, ToyOptions())
    relu, add, soft = TABLE.lower_graph(ctx)
    assert (relu.name, relu.op, relu.inputs, relu.output, relu.backend) == (
        "relu", "copy", ("x",), "a", "toy",
    )  # fmt: skip
    assert (add.op, add.exact, add.inputs) == ("float:Add", False, ("a",))
    assert add.note == "the first operand (a) is not a constant initializer"
    assert (soft.op, soft.note) == ("float:Softmax", "no LUT")
    assert ctx.encodings == {"a": ENC, "b": ENC, "c": ENC}
    assert TABLE.supported() == ["Add", "Relu", "Softmax"]


def test_the_float_fallback_runs_the_float_kernel_with_its_constants():
    ctx = ToyContext(_graph(), {}, ToyOptions())
    add = TABLE.lower_graph(ctx)[1]
    out = add.run([QTensor(np.array([[0, 1, 2, -4]], np.int8), ENC)])
    # (code * 0.25 + 0.5) / 0.25, rounded half to even
    assert out.tensor.codes.tolist() == [[2, 3, 4, -2]] and out.counters == {}


def test_without_fallback_a_not_lowerable_node_is_unsupported_with_the_reason():
    ctx = ToyContext(_graph(), {}, ToyOptions(), fallback_allowed=False)
    with pytest.raises(UnsupportedError) as info:
        TABLE.lower_graph(ctx)
    assert "operator 'Add' cannot be lowered (the first operand (a) is not a constant" in str(
        info.value
    )
    # Every blocking node is named (Softmax too), and the supported set once.
    assert "supported operators: Add, Relu, Softmax" in str(info.value)
    assert str(info.value).count("supported operators") == 1
    assert "operator 'Softmax' cannot be lowered (no LUT)" in str(info.value)


def test_an_op_without_rule_or_fallback_lists_the_supported_ops():
    table = RuleTable(rules={"Relu": _relu})
    graph = _graph()
    with pytest.raises(UnsupportedError, match=r"operator 'Add' cannot be lowered; supported "):
        table.lower_graph(ToyContext(graph, {}, ToyOptions()))


def test_rules_may_raise_not_lowerable_directly():
    def picky(ctx, node):
        raise NotLowerable("too picky")

    table = RuleTable(rules={"Relu": picky}, fallback=_fallback)
    layer = table.lower_node(ToyContext(_graph(), {}, ToyOptions()), _graph().nodes[0])
    assert layer.note == "too picky"


def test_the_registry_lists_the_shipped_backends():
    assert known_backends() == ["xs3", "nvdla", "onednn", "nnie", "tflite"]
    assert [s.name for s in backend_specs()] == known_backends()
    assert backend_spec("nnie").lint is not None
    with pytest.raises(InvalidInputError, match="unknown backend 'tpu'; choose one of xs3, "):
        backend_spec("tpu")
