"""``Unsupported``: an ONNX node the importer could not normalize, kept opaque for inspection.

``load_onnx(path, strict=False)`` keeps every node it cannot import as one of these, so that the
graph can still be printed and each backend's support checked around it. Its attributes:
``onnx_op`` (the ONNX op type, e.g. ``"LayerNormalization"``), ``reason`` (the importer's
message), ``kind`` (``"unknown operator"``, ``"unsupported attribute or value"``, ``"opset"``,
``"operator domain"`` or ``"unknown input shape"``) and ``output_shapes`` (one shape per
output, from the model's ``value_info`` or ONNX shape inference; ``("?",)`` where unknown). It
has no float kernel and no lowering: running or lowering a graph that holds one raises
:func:`unsupported_error`, which lists every such node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Attrs, Graph, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import register

#: The IR op type of a node the importer could not normalize.
UNSUPPORTED = "Unsupported"

#: How many node names each group of :func:`describe` shows.
SHOWN_NAMES = 3


def _infer(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [tuple(shape) for shape in node.attrs["output_shapes"]]


def _run(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    raise UnsupportedError(
        f"operator {attrs['onnx_op']!r} was not imported ({attrs['reason']}); it has no float "
        "kernel"
    )


register(UNSUPPORTED, _infer, _run, inputs=(0, 1 << 10))


def describe(entries: Iterable[tuple[str, str, str]]) -> str:
    """``(op type, node name, reason)`` entries grouped by op type: count, first names, reason.

    One line per op type, in order of first appearance, e.g. ``Erf x2 (nodes 'a', 'b'):
    operator 'Erf' is not supported``; the reason shown is the first node's.
    """
    groups: dict[str, list[tuple[str, str]]] = {}
    for op_type, name, reason in entries:
        groups.setdefault(op_type, []).append((name, reason))
    lines = []
    for op_type, items in groups.items():
        names = ", ".join(repr(name) for name, _ in items[:SHOWN_NAMES])
        more = f" and {len(items) - SHOWN_NAMES} more" if len(items) > SHOWN_NAMES else ""
        noun = "node" if len(items) == 1 else "nodes"
        lines.append(f"  - {op_type} x{len(items)} ({noun} {names}{more}): {items[0][1]}")
    return "\n".join(lines)


def unsupported_nodes(graph: Graph) -> list[Node]:
    """The opaque ``Unsupported`` nodes of ``graph`` (empty for a fully imported graph)."""
    return [node for node in graph.nodes if node.op_type == UNSUPPORTED]


def unsupported_error(nodes: Sequence[Node], what: str = "", extra: str = "") -> UnsupportedError:
    """One error naming every ``Unsupported`` node, grouped by ONNX op type (``extra``: a line
    to add, such as the supported set)."""
    entries = [(n.attrs["onnx_op"], n.name, n.attrs["reason"]) for n in nodes]
    kinds = len({e[0] for e in entries})
    prefix = f"{what}: " if what else ""
    lines = [
        f"{prefix}the model has {len(nodes)} node(s) of {kinds} operator type(s) quantemu does "
        "not import:",
        describe(entries),
        *([extra] if extra else []),
        "(`quantemu inspect MODEL --support` shows the graph and what each backend runs)",
    ]
    return UnsupportedError("\n".join(lines))


def check_imported(graph: Graph, what: str = "") -> None:
    """Raise :func:`unsupported_error` when ``graph`` holds ``Unsupported`` nodes."""
    nodes = unsupported_nodes(graph)
    if nodes:
        raise unsupported_error(nodes, what)
