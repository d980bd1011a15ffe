"""ONNX protos decoded into what the importer works with: initializers and ``Constant`` values
as NumPy arrays, nodes as :class:`RawNode` with unique names, the values a node's subgraphs read
from the enclosing graph, and an ``If`` whose condition is constant replaced by the nodes of the
branch it takes."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.onnx_attrs import RawNode

_DEFAULT_DOMAINS = ("", "ai.onnx")


def array_of(tensor, what: str) -> np.ndarray:
    try:
        return np.array(numpy_helper.to_array(tensor))
    except Exception as exc:
        raise InvalidInputError(f"{what} {tensor.name!r} cannot be decoded: {exc}") from exc


def decode_initializers(onnx_graph) -> dict[str, np.ndarray]:
    if len(onnx_graph.sparse_initializer):
        raise UnsupportedError("sparse initializers are not supported")
    consts = {}
    for tensor in onnx_graph.initializer:
        value = array_of(tensor, "initializer")
        if value.size != int(np.prod(tuple(tensor.dims), dtype=np.int64)):
            raise InvalidInputError(
                f"initializer {tensor.name!r} holds {value.size} values for dims "
                f"{tuple(tensor.dims)}"
            )
        consts[tensor.name] = value
    return consts


def raw_nodes(
    node_protos: Iterable[Any], consts: dict[str, np.ndarray], prefix: str = ""
) -> list[RawNode]:
    """Decode nodes; name each by the module that made it where the exporter recorded one
    (:func:`layer_name`); give unnamed or duplicate nodes unique names; fold Constant nodes."""
    nodes: list[RawNode] = []
    names: set[str] = set()
    for index, proto in enumerate(node_protos):
        name = prefix + (layer_name(proto, names) or proto.name or f"{proto.op_type}_{index}")
        if name in names:
            name = f"{name}_{index}"
        names.add(name)
        attrs = {a.name: attr_value(a) for a in proto.attribute}
        outputs = tuple(proto.output)
        while outputs and not outputs[-1]:
            outputs = outputs[:-1]
        raw = RawNode(name, proto.op_type, proto.domain, tuple(proto.input), outputs, attrs)
        if raw.op_type == "Constant" and raw.domain in _DEFAULT_DOMAINS:
            consts[raw.outputs[0]] = constant_value(raw)
            continue
        nodes.append(raw)
    return nodes


def layer_name(proto, taken: set[str]) -> str | None:
    """The module path PyTorch's exporter recorded for the node (``layer1.0.conv1``), or None.

    torch.onnx's dynamo exporter names nodes by op (``node_Conv_554``) and keeps the module
    hierarchy in the node's metadata: ``pkg.torch.onnx.name_scopes`` lists the scopes from the
    root to the FX node (``['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_3']``), the
    last one being the op. The first node of a module takes the module's path; the next ones
    (a module that exports as several ops) add the FX node's name.
    """
    props = {p.key: p.value for p in proto.metadata_props}
    scopes = _scopes(props)
    if len(scopes) < 2 or not scopes[-2]:
        return None
    module, op = scopes[-2], scopes[-1]
    return module if module not in taken else f"{module}/{op}"


def _scopes(props: dict[str, str]) -> list[str]:
    text = props.get("pkg.torch.onnx.name_scopes")
    if text is not None:
        try:
            scopes = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return []
        return [str(s) for s in scopes] if isinstance(scopes, list) else []
    # Older exporters: ": root/layer1: Sequential/layer1.0.conv1: Conv2d/conv2d: aten.conv2d"
    text = props.get("namespace")
    if not text:
        return []
    return [part.split(":")[0].strip() for part in text.split("/")]


def attr_value(attribute) -> Any:
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in value]
    return value


def constant_value(raw: RawNode) -> np.ndarray:
    if len(raw.attrs) != 1:
        raise InvalidInputError(f"{raw}: a Constant has exactly one value attribute")
    key, value = next(iter(raw.attrs.items()))
    if key == "value":
        return array_of(value, f"{raw} value")
    kinds = {
        "value_float": np.float32,
        "value_floats": np.float32,
        "value_int": np.int64,
        "value_ints": np.int64,
    }
    if key not in kinds:
        raise UnsupportedError(
            f"{raw}: Constant attribute {key!r} is not supported; supported: "
            "value, value_float(s), value_int(s)"
        )
    return np.array(value, dtype=kinds[key])


def outer_reads(raw: RawNode) -> set[str]:
    """The values of the enclosing graph that the node's subgraphs (an If's branches) read: a
    dependency the node's input list does not show."""
    reads: set[str] = set()
    for value in raw.attrs.values():
        for graph in value if isinstance(value, list) else [value]:
            if isinstance(graph, onnx.GraphProto):
                reads |= _graph_reads(graph)
    return reads


def _graph_reads(graph) -> set[str]:
    inner = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    reads: set[str] = set()
    for node in graph.node:
        reads.update(name for name in node.input if name and name not in inner)
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                reads |= _graph_reads(sub) - inner
        inner.update(node.output)
    reads.update(v.name for v in graph.output if v.name not in inner)
    return reads


def inline_if(raw: RawNode, consts: dict[str, np.ndarray]) -> list[RawNode] | None:
    """The nodes of the branch an ``If`` takes when its condition is a constant (None when it
    is not): the branch's nodes named under the If, its constants added to ``consts``, and one
    Identity per output onto the If's outputs. Exporters write such Ifs for checks made at
    export time (a batch or rank test on static shapes); the branch may read any value of the
    enclosing graph."""
    if raw.op_type != "If" or raw.domain not in _DEFAULT_DOMAINS or raw.inputs[0] not in consts:
        return None
    cond = consts[raw.inputs[0]]
    if cond.size != 1:
        raise InvalidInputError(f"{raw}: the condition holds {cond.size} values; If takes one")
    key = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
    branch = raw.attrs.get(key)
    if not isinstance(branch, onnx.GraphProto):
        raise InvalidInputError(f"{raw}: the condition selects {key}, which the node lacks")
    results = [v.name for v in branch.output]
    if len(results) < len(raw.outputs):
        raise InvalidInputError(
            f"{raw}: {key} gives {len(results)} outputs for the node's {len(raw.outputs)}"
        )
    consts.update(decode_initializers(branch))
    nodes = raw_nodes(branch.node, consts, prefix=f"{raw.name}/{key}/")
    identities = [
        RawNode(f"{raw.name}/{out}", "Identity", "", (result,), (out,), {})
        for result, out in zip(results, raw.outputs, strict=False)
        if out
    ]
    return nodes + identities
