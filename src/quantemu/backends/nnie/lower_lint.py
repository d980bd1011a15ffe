"""The NNIE constraints lint on a :class:`~quantemu.graph.Graph`: IR nodes -> :class:`NodeView`.

:func:`lint_graph` adapts each node of the (optimized) graph to the backend-neutral
:class:`~quantemu.backends.nnie.lint.NodeView` the rules read, and runs
:func:`~quantemu.backends.nnie.lint.lint_nnie`. ``lower()`` records the findings in the lowered
model (header ``lint`` and ``NnieLoweredModel.findings``); the CLI can call :func:`lint_graph`
directly.
"""

from __future__ import annotations

from collections import Counter

from quantemu.backends.nnie.lint import Finding, NodeView, Severity, lint_nnie
from quantemu.graph.ir import Graph, Node


def _static_shape(shape) -> tuple[int, ...] | None:
    """A shape with the (symbolic) batch bound to 1; ``None`` if another dimension is unknown.

    The rules read channels and spatial sizes only, which a symbolic batch does not affect.
    """
    dims = list(shape)
    if dims and not isinstance(dims[0], int):
        dims[0] = 1
    if not all(isinstance(d, int) for d in dims):
        return None
    return tuple(dims)


def node_view(graph: Graph, node: Node) -> NodeView:
    """The :class:`NodeView` of ``node``: attributes, static input shapes, Conv weight shape, and
    Resize's ``scales``/``sizes`` (normalized into attributes by the importer)."""
    shapes = tuple(
        _static_shape(graph.tensors[name].shape) if name in graph.tensors else None
        for name in node.inputs
    )
    weight_shape = None
    if node.op_type == "Conv" and len(node.inputs) > 1 and node.inputs[1] in graph.tensors:
        weight_shape = _static_shape(graph.tensors[node.inputs[1]].shape)
    constants = {
        key: tuple(node.attrs[key])
        for key in ("scales", "sizes")
        if node.op_type == "Resize" and key in node.attrs
    }
    return NodeView(node.name, node.op_type, dict(node.attrs), shapes, weight_shape, constants)


def lint_graph(graph: Graph) -> list[Finding]:
    """Every NNIE model-constraint finding (seed 003's list) on ``graph``'s nodes, in order.

    >>> from quantemu.data import demo_model_path
    >>> from quantemu.graph import load_onnx, optimize
    >>> [(f.node, f.rule, f.severity.value) for f in lint_graph(optimize(load_onnx(
    ...     demo_model_path())))]  # doctest: +NORMALIZE_WHITESPACE
    [('/depthwise/Conv', 'depthwise_conv', 'warning'),
     ('/pool/MaxPool', 'pool_ceil_mode', 'warning'),
     ('/avgpool/AveragePool', 'pool_ceil_mode', 'warning')]
    """
    return lint_nnie(node_view(graph, node) for node in graph.nodes)


def summarize(findings: list[Finding]) -> str:
    """``"3 findings (0 error, 3 warning, 0 info)"``: a one-line count for report headers.

    >>> summarize([])
    '0 findings'
    """
    if not findings:
        return "0 findings"
    counts = Counter(f.severity for f in findings)
    parts = ", ".join(f"{counts[s]} {s.value}" for s in Severity)
    return f"{len(findings)} findings ({parts})"
