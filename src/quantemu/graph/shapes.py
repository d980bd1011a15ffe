"""Shape inference: the shape and dtype of every value of a graph.

Each node's output shapes come from its op's shape function (:mod:`quantemu.graph.ops`), which
also checks that the input shapes fit together (weights against channels, broadcasting, ...), so
a model with inconsistent initializers fails here, naming the node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import TensorInfo
from quantemu.graph.ops import spec

if TYPE_CHECKING:
    from quantemu.graph.ir import Graph, Node

#: The dtype of every value the float executor computes.
FLOAT = "float32"


def infer_shapes(graph: Graph) -> dict[str, TensorInfo]:
    """Every tensor's :class:`TensorInfo`, in definition order (inputs, initializers, nodes)."""
    tensors: dict[str, TensorInfo] = {t.name: t for t in graph.inputs}
    for name, value in graph.initializers.items():
        tensors[name] = TensorInfo(name, tuple(int(d) for d in value.shape), value.dtype.name)
    for node in graph.nodes:
        infos = [tensors[name] if name else None for name in node.inputs]
        for name, shape in zip(node.outputs, infer_node(node, infos), strict=True):
            if name:
                tensors[name] = TensorInfo(name, shape, FLOAT)
    return tensors


def infer_node(node: Node, infos: list[TensorInfo | None]) -> list[tuple]:
    """The output shapes of one node given its inputs' infos (checks arity and dtypes)."""
    op = spec(node.op_type, where=str(node))
    present = len(infos)
    if not op.min_inputs <= present <= op.max_inputs:
        expected = (
            str(op.min_inputs)
            if op.min_inputs == op.max_inputs
            else f"{op.min_inputs} to {op.max_inputs}"
        )
        raise InvalidInputError(f"{node}: takes {expected} inputs, got {present}")
    for info in infos:
        if info is not None and info.dtype != FLOAT:
            raise InvalidInputError(
                f"{node}: input {info.name!r} has dtype {info.dtype}; the float graph computes "
                "in float32 only"
            )
    shapes = list(op.infer(node, infos))
    if len(node.outputs) > len(shapes):
        raise InvalidInputError(
            f"{node}: has {len(node.outputs)} outputs, but {node.op_type} produces "
            f"{len(shapes)} in inference"
        )
    return shapes[: len(node.outputs)]
