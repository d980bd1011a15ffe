"""Writing a graph back to ONNX: the inverse of :func:`~quantemu.graph.load_onnx` on its IR.

Used to save a model whose weights quantemu changed (quantization-aware training,
``quantemu.torch``), so that ``quantemu run`` / ``quantemu.compile`` read it back. The IR's
attributes are ONNX's, normalized; the one IR-only form, a fused activation (``activation=...``
on its producer, :func:`~quantemu.graph.passes.fuse_activation`), is written as the producer and
its Relu / Clip / LeakyRelu node again, which the default passes fuse on loading. Extra
``metadata`` becomes the model's ``metadata_props``; the importer keeps the ``quantemu.*`` keys
in ``Graph.metadata``. Tensors may be written behind Q/DQ pairs (``qdq``), for other tools; a
file that also carries ``quantemu.ranges`` is read back by quantemu without them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node

#: Attributes the IR adds to a producer for a fused activation (written as a separate node).
FUSED = ("activation", "activation_min", "activation_max", "activation_alpha")
#: Normalized attributes that ONNX admits only where they differ from the default (older opsets
#: reject them on some operators: AveragePool's dilations arrived in opset 19).
DEFAULT_SKIPPED = {"dilations": (1, 1)}


def to_onnx(
    graph: Graph,
    metadata: Mapping[str, str] | None = None,
    qdq: Mapping[str, tuple[float, int, str]] | None = None,
) -> onnx.ModelProto:
    """``graph`` as an ONNX model (opset ``graph.opset``), with ``metadata`` as properties.

    ``qdq``: tensor name -> ``(scale, zero_point, dtype)`` (``"int8"`` or ``"uint8"``) of tensors
    to write behind a QuantizeLinear -> DequantizeLinear pair, their readers reading the pair's
    output (the graph's outputs are left as they are), so that tools that read QDQ models see
    the quantization; the scale is written as float32, as ONNX holds it.
    """
    nodes: list[onnx.NodeProto] = []
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in graph.initializers.items()]
    pairs = {name: params for name, params in (qdq or {}).items() if name not in graph.outputs}
    renamed = {name: f"{name}__dq" for name in pairs}
    for info in graph.inputs:
        if info.name in pairs:
            nodes.extend(_qdq_pair(info.name, pairs[info.name], inits))
    for original in graph.nodes:
        node = dataclasses.replace(
            original, inputs=tuple(renamed.get(n, n) for n in original.inputs)
        )
        nodes.extend(_node(node, inits))
        for out in node.outputs:
            if out in pairs:
                nodes.extend(_qdq_pair(out, pairs[out], inits))
    model = helper.make_model(
        helper.make_graph(
            nodes,
            graph.name,
            [_value_info(graph, info.name) for info in graph.inputs],
            [_value_info(graph, name) for name in graph.outputs],
            inits,
        ),
        opset_imports=[helper.make_opsetid("", graph.opset)],
        producer_name="quantemu",
    )
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    return model


def save_onnx(
    graph: Graph,
    path: str | Path,
    metadata: Mapping[str, str] | None = None,
    qdq: Mapping[str, tuple[float, int, str]] | None = None,
) -> None:
    """Write :func:`to_onnx` to ``path`` (a clear error if the directory does not exist)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise InvalidInputError(
            f"cannot write {path}: the directory {path.parent} does not exist; create it first"
        )
    onnx.save_model(to_onnx(graph, metadata, qdq), str(path))


def _qdq_pair(name: str, params: tuple[float, int, str], inits: list) -> list[onnx.NodeProto]:
    scale, zero_point, dtype = params
    if dtype not in ("int8", "uint8"):
        raise UnsupportedError(f"QDQ of {name!r}: dtype {dtype} (QuantizeLinear takes int8/uint8)")
    inits.append(numpy_helper.from_array(np.array(scale, np.float32), f"{name}__scale"))
    inits.append(numpy_helper.from_array(np.array(zero_point, dtype), f"{name}__zero_point"))
    args = [f"{name}__scale", f"{name}__zero_point"]
    return [
        helper.make_node("QuantizeLinear", [name, *args], [f"{name}__q"], name=f"{name}__q"),
        helper.make_node(
            "DequantizeLinear", [f"{name}__q", *args], [f"{name}__dq"], name=f"{name}__dq"
        ),
    ]


def _node(node: Node, inits: list) -> list[onnx.NodeProto]:
    if node.op_type.startswith("Tflite") or node.op_type == "Unsupported":
        raise UnsupportedError(f"{node} ({node.op_type}) has no ONNX form to write")
    attrs = {k: v for k, v in node.attrs.items() if k not in FUSED}
    kind = node.attrs.get("activation")
    outputs = list(node.outputs)
    if kind is not None:
        outputs = [f"{node.outputs[0]}__before_{kind}"]
    extra_inputs: list[str] = []
    if node.op_type == "Clip":  # opset 11+: the bounds are inputs
        low, high = attrs.pop("min", None), attrs.pop("max", None)
        extra_inputs = _clip_bounds(node.name, low, high, inits)
    written = [
        helper.make_node(
            node.op_type,
            [*node.inputs, *extra_inputs] if extra_inputs else list(node.inputs),
            outputs,
            name=node.name,
            **{k: _attribute(v) for k, v in attrs.items() if not _default(k, v)},
        )
    ]
    if kind is not None:
        written.append(_activation(node, kind, outputs[0], inits))
    return written


def _activation(node: Node, kind: str, source: str, inits: list) -> onnx.NodeProto:
    name, out = f"{node.name}__{kind}", node.outputs[0]
    if kind == "relu":
        return helper.make_node("Relu", [source], [out], name=name)
    if kind == "leaky_relu":
        return helper.make_node(
            "LeakyRelu", [source], [out], name=name, alpha=float(node.attrs["activation_alpha"])
        )
    bounds = _clip_bounds(name, node.attrs["activation_min"], node.attrs["activation_max"], inits)
    return helper.make_node("Clip", [source, *bounds], [out], name=name)


def _clip_bounds(name: str, low, high, inits: list) -> list[str]:
    names = []
    for which, value in (("min", low), ("max", high)):
        if value is None:
            names.append("")
            continue
        names.append(f"{name}__{which}")
        inits.append(numpy_helper.from_array(np.array(value, np.float32), names[-1]))
    while names and names[-1] == "":
        names.pop()
    return names


def _default(key: str, value) -> bool:
    return key in DEFAULT_SKIPPED and tuple(value) == DEFAULT_SKIPPED[key]


def _attribute(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _value_info(graph: Graph, name: str) -> onnx.ValueInfoProto:
    info = graph.tensors.get(name)
    if info is None:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
    # a symbolic size keeps its name ("N"); an unknown or derived one ("?", "N*64") is left open
    shape = [d if isinstance(d, int) or str(d).isidentifier() else None for d in info.shape]
    dtype = helper.np_dtype_to_tensor_dtype(np.dtype(info.dtype))
    return helper.make_tensor_value_info(name, dtype, shape)
