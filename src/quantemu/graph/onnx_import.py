"""ONNX import: parse a model with the ``onnx`` library and build a :class:`~quantemu.graph.Graph`.

Steps: parse (a corrupt or truncated file is an :class:`InvalidInputError`, never a protobuf
traceback); check the opset; decode initializers and ``Constant`` nodes into NumPy constants;
order the nodes topologically (a dangling input is an error naming the node); remove Q/DQ pairs
(:mod:`quantemu.graph.qdq`); normalize each node (:mod:`quantemu.graph.onnx_attrs`), inferring
shapes as it goes, so that auto_pad and negative axes can be resolved; and build the graph.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from quantemu.errors import InvalidInputError, QuantemuError, UnsupportedError
from quantemu.graph.ir import UNKNOWN_DIM, Graph, Node, QuantOverride, TensorInfo
from quantemu.graph.ir import _bound as bound_shape
from quantemu.graph.onnx_attrs import (
    MAX_OPSET,
    MIN_OPSET,
    NORMALIZERS,
    Context,
    RawNode,
    check_reviewed,
)
from quantemu.graph.onnx_lift_1d import lift_1d
from quantemu.graph.onnx_nodes import decode_initializers, inline_if, outer_reads, raw_nodes
from quantemu.graph.onnx_shape_fold import rewrite_raw
from quantemu.graph.ops.unsupported import UNSUPPORTED, unsupported_error
from quantemu.graph.qdq import DEQUANTIZE, QUANTIZE, drop_qdq_pairs, remove_qdq
from quantemu.graph.shapes import infer_node
from quantemu.graph.zero_states import drop_zero_states

__all__ = ["MAX_OPSET", "MIN_OPSET", "load_onnx"]

_DEFAULT_DOMAINS = ("", "ai.onnx")

Source = str | os.PathLike | bytes


def load_onnx(
    source: Source | Any,
    *,
    name: str | None = None,
    strict: bool = True,
    shapes: Mapping[str, Sequence] | None = None,
) -> Graph:
    """Import an ONNX model (a path, the file's bytes, or an ``onnx.ModelProto``).

    ``shapes`` binds symbolic input dimensions before anything is folded or normalized
    (``{"input": (1, 3, 224, 224)}``; ``None`` or a name keeps a dimension symbolic), as
    ``--input-shape`` does: shape computations and ``auto_pad`` SAME need known sizes.

    The result is the float graph: Q/DQ pairs are removed and their parameters kept in
    ``graph.quant_overrides``; no optimization pass has run (see :mod:`quantemu.graph.passes`).
    Raises :class:`InvalidInputError` for unreadable, corrupt or inconsistent models and
    :class:`UnsupportedError` for operators, attributes or opsets quantemu does not handle: one
    error that lists every node it cannot import, grouped by op type. With ``strict=False``
    those nodes are kept as opaque ``Unsupported`` nodes instead
    (:mod:`quantemu.graph.ops.unsupported`), so that the graph can be inspected; such a graph
    cannot be run or lowered. ``"demo"`` is the built-in digits CNN, as on the command line.
    """
    from quantemu.graph.loading import resolve_demo  # noqa: PLC0415 (loading imports this lazily)

    model, where = _parse(resolve_demo(source))
    try:
        return _build(model, where, name, strict, dict(shapes or {}))
    except QuantemuError as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise InvalidInputError(f"{where}: malformed model ({type(exc).__name__}: {exc})") from exc


def _parse(source) -> tuple[Any, str]:
    if isinstance(source, onnx.ModelProto):
        return source, "<ModelProto>"
    if isinstance(source, bytes | bytearray | memoryview):
        data, where, base = bytes(source), "<bytes>", None
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        where, base = str(path), path.parent
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidInputError(
                f"cannot read ONNX model {where}: {exc.strerror or exc}"
            ) from exc
    else:
        raise InvalidInputError(
            f"load_onnx expects a path, bytes or an onnx.ModelProto, got {type(source).__name__}"
        )
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError (or RuntimeError in some builds)
        raise InvalidInputError(
            f"{where} is not a valid ONNX model: it cannot be decoded ({exc}); the file may be "
            "truncated or corrupt, or not an ONNX file at all"
        ) from exc
    if not model.HasField("graph") or not model.opset_import:
        raise InvalidInputError(
            f"{where} is not a valid ONNX model: it has no graph or no opset_import (truncated, "
            "corrupt, or not an ONNX file)"
        )
    if base is not None:
        _load_external(model, base, where)
    return model, where


def _load_external(model, base: Path, where: str) -> None:
    if any(uses_external_data(t) for t in model.graph.initializer):
        try:
            load_external_data_for_model(model, str(base))
        except Exception as exc:
            raise InvalidInputError(f"{where}: cannot load external tensor data: {exc}") from exc


def _opset(model) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        domains = sorted({n.domain for n in model.graph.node} - set(_DEFAULT_DOMAINS))
        if domains and all(n.domain not in _DEFAULT_DOMAINS for n in model.graph.node):
            raise UnsupportedError(
                f"operator domain {', '.join(map(repr, domains))} is not supported (only the "
                "default ai.onnx domain)"
            )
        raise InvalidInputError("the model imports no default-domain (ai.onnx) opset")
    opset = int(versions[0])
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError(
            f"opset {opset} is not supported; quantemu imports opsets {MIN_OPSET} to {MAX_OPSET} "
            "(convert with onnx.version_converter.convert_version(model, 17))"
        )
    return opset


def _build(model, where: str, name: str | None, strict: bool, shapes: dict) -> Graph:
    onnx_graph = model.graph
    opset = _opset(model)
    consts = decode_initializers(onnx_graph)
    given = _bind([_input_info(v) for v in onnx_graph.input if v.name not in consts], shapes)
    inputs = [t for t in given if t.dtype == "float32"]
    lenient = _Lenient(strict, _shape_hints(model, inputs, infer=not strict))
    nodes = raw_nodes(onnx_graph.node, consts)
    if len(inputs) < len(given):
        raise _non_float_error([t for t in given if t.dtype != "float32"], nodes)
    outputs = [v.name for v in onnx_graph.output]
    if not outputs:
        raise InvalidInputError("the graph declares no outputs")
    nodes = _toposort(nodes, {t.name for t in inputs} | set(consts), outputs)
    nodes = drop_zero_states(nodes, outputs)  # PyTorch's run-time zero h0/c0 of LSTM/GRU
    carried = any(p.key == "quantemu.ranges" for p in model.metadata_props)
    if carried and any(n.op_type in (QUANTIZE, DEQUANTIZE) for n in nodes):
        # quantemu's own export: its exact ranges are the property; the Q/DQ pairs written for
        # other tools are dropped as they are (no clamp, no override), leaving the float graph
        nodes, overrides = drop_qdq_pairs(nodes), {}
    elif any(n.op_type in (QUANTIZE, DEQUANTIZE) for n in nodes):
        nodes, overrides = remove_qdq(nodes, consts, outputs, opset)
    else:
        overrides = {}
    # Conv1d & co. become 2-D ops before any shape is inferred
    nodes, overrides = lift_1d(nodes, consts, overrides, opset, {t.name: t.rank for t in inputs})
    ir_nodes, tensors = _normalize(nodes, opset, consts, inputs, outputs, lenient=lenient)
    used = {n for node in ir_nodes for n in node.inputs} | set(outputs)
    initializers = {k: _float_const(k, v) for k, v in consts.items() if k in used}
    overrides = _normalize_axes(overrides, tensors, initializers)
    metadata = {
        "source": where,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "ir_version": str(model.ir_version),
        # what quantemu wrote with the model (onnx_export): learned ranges, the backend, ...
        **{p.key: p.value for p in model.metadata_props if p.key.startswith("quantemu.")},
    }
    return Graph(
        name=name or onnx_graph.name or Path(where).stem,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        nodes=tuple(ir_nodes),
        initializers=initializers,
        quant_overrides=overrides,
        opset=opset,
        metadata=metadata,
    )


def _input_info(value_info) -> TensorInfo:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise UnsupportedError(f"graph input {value_info.name!r} is a {kind}, not a tensor")
    tensor_type = value_info.type.tensor_type
    # Any type is read here; _build refuses the non-float ones, naming the nodes that read them.
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
    except (KeyError, ValueError):
        dtype = TensorProto.DataType.Name(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        raise UnsupportedError(
            f"graph input {value_info.name!r} has no shape; export the model "
            "with a static shape (a symbolic batch dimension is fine)"
        )
    dims = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(int(dim.dim_value))
        else:
            dims.append(
                dim.dim_param if dim.HasField("dim_param") and dim.dim_param else UNKNOWN_DIM
            )
    return TensorInfo(value_info.name, tuple(dims), dtype)


def _toposort(nodes: list[RawNode], defined: set[str], outputs: list[str]) -> list[RawNode]:
    """Kahn's algorithm, stable in file order; names the first dangling input or cycle."""
    producer = {}
    for node in nodes:
        # filter: an omitted optional output ("", Attention's qk_matmul_output...) is no value
        for name in filter(None, node.outputs):
            if name in producer or name in defined:
                raise InvalidInputError(f"{node}: output {name!r} is defined twice")
            producer[name] = node
    for node in nodes:
        for name in node.inputs:
            if name and name not in defined and name not in producer:
                raise InvalidInputError(
                    f"{node}: input {name!r} is not a graph input, an initializer, or the output "
                    "of any node (a dangling input: the model is incomplete or corrupt)"
                )
    for name in outputs:
        if name not in defined and name not in producer:
            raise InvalidInputError(f"graph output {name!r} is not produced by any node")
    # An If's branches read values of this graph that its input list does not name.
    needs = {id(n): [*n.inputs, *(r for r in outer_reads(n) if r in producer)] for n in nodes}
    ordered, done, pending = [], set(defined), list(nodes)
    while pending:
        ready = [n for n in pending if all(not i or i in done for i in needs[id(n)])]
        if not ready:
            raise InvalidInputError(f"the graph has a cycle through {pending[0]}")
        ready_ids = {id(n) for n in ready}
        for node in ready:
            ordered.append(node)
            done.update(node.outputs)
        pending = [n for n in pending if id(n) not in ready_ids]
    return ordered


def _normalize(nodes, opset, consts, inputs, outputs, *, lenient: _Lenient):
    tensors = {t.name: t for t in inputs}
    for key, value in consts.items():
        tensors[key] = TensorInfo(key, value.shape, _float_const(key, value).dtype.name)
    used = {name for node in nodes for name in [*node.inputs, *outer_reads(node)]}
    ctx = Context(opset, consts, tensors, used | set(outputs))
    ir_nodes = []
    queue = list(reversed(nodes))
    while queue:
        raw = queue.pop()
        inlined = inline_if(raw, consts)
        if inlined is not None:  # the branch's nodes take the If's place, in order
            _add_consts(ctx)
            ctx.used.update(name for node in inlined for name in node.inputs)
            queue.extend(reversed(inlined))
            continue
        # A node after an unsupported one may fail only because its input shape is unknown.
        tainted = any(name in lenient.opaque for name in raw.inputs)
        if tainted:
            lenient.opaque.update(raw.outputs)
        try:
            # Shape sub-graphs fold to constants and Split becomes Slices before normalizing.
            produced = [_normalize_node(r, ctx) for r in rewrite_raw(raw, ctx)]
        except (UnsupportedError, InvalidInputError) as exc:
            # Strict, a model that is wrong is reported as such; lenient, every node is listed.
            if isinstance(exc, InvalidInputError) and not tainted and lenient.strict:
                raise
            produced = [lenient.record(raw, exc, _TAINTED if tainted else "", tensors)]
        for node in produced:
            infos = [tensors[name] if name else None for name in node.inputs]
            for out, shape in zip(node.outputs, infer_node(node, infos), strict=True):
                tensors[out] = TensorInfo(out, shape, "float32")
            ir_nodes.append(node)
    lenient.check()
    return ir_nodes, tensors


def _add_consts(ctx: Context) -> None:
    for key, value in ctx.consts.items():
        if key not in ctx.tensors:
            ctx.tensors[key] = TensorInfo(key, value.shape, _float_const(key, value).dtype.name)


def _normalize_node(raw: RawNode, ctx: Context):
    if raw.domain not in _DEFAULT_DOMAINS:
        raise UnsupportedError(
            f"{raw}: operator domain {raw.domain!r} is not supported "
            "(only the default ai.onnx domain)"
        )
    fn = NORMALIZERS.get(raw.op_type)
    if fn is None:
        raise UnsupportedError(
            f"{raw}: operator {raw.op_type!r} is not supported; supported operators: "
            f"{_supported_list()}"
        )
    check_reviewed(raw, ctx.opset)
    node = fn(raw, ctx)
    # Shape inference of the normalized node belongs to the node: a rank or attribute form the
    # op's shape function rejects is that node's failure, not the model's.
    infer_node(node, [ctx.tensors[name] if name else None for name in node.inputs])
    return node


def _supported_list() -> str:
    return ", ".join(sorted({*NORMALIZERS, "Constant", QUANTIZE, DEQUANTIZE}))


_TAINTED = "unknown input shape"


class _Lenient:
    """Every node the importer cannot normalize: raised as one error, or kept opaque."""

    def __init__(self, strict: bool, hints: dict[str, tuple]) -> None:
        self.strict = strict
        self.hints = hints
        # Values whose shape may be unknown: outputs of opaque nodes and of what follows them.
        self.opaque: set[str] = set()
        self.failures: list[tuple[RawNode, QuantemuError, Node]] = []

    def record(self, raw: RawNode, exc: QuantemuError, kind: str, tensors) -> Node:
        message = str(exc).removeprefix(f"{raw}: ")
        own = _kind(message)
        # An unknown operator is a finding wherever it is; anything else after an opaque node
        # of unknown shape may be a consequence of that shape.
        kind = own if own in ("unknown operator", "operator domain") or not kind else kind
        if kind == "unknown operator":
            message = message.split(";")[0]
        outputs = tuple(raw.outputs)
        shapes = tuple(self.hints.get(out, (UNKNOWN_DIM,)) for out in outputs)
        self.opaque.update(o for o, s in zip(outputs, shapes, strict=True) if UNKNOWN_DIM in s)
        attrs = {"onnx_op": raw.op_type, "reason": message, "kind": kind, "output_shapes": shapes}
        # Integer inputs (indices, shapes) are attribute-like: the float graph has no place
        # for them, and they carry no dependency the graph printout needs.
        inputs = tuple(n for n in raw.inputs if n and tensors[n].dtype == "float32")
        node = Node(raw.name, UNSUPPORTED, inputs, outputs, attrs)
        self.failures.append((raw, exc, node))
        return node

    def check(self) -> None:
        """In strict mode, raise one error naming every node that could not be imported."""
        # A node that failed only for its input's unknown shape follows a real failure.
        real = [f for f in self.failures if f[2].attrs["kind"] != _TAINTED]
        if not self.strict or not real:
            return
        if len(real) == 1:
            raise real[0][1]
        unknown = any(f[2].attrs["kind"] == "unknown operator" for f in real)
        supported = f"supported operators: {_supported_list()}" if unknown else ""
        raise unsupported_error([node for _, _, node in real], extra=supported) from real[0][1]


def _non_float_error(non_float: list[TensorInfo], nodes: list[RawNode]) -> UnsupportedError:
    name, info = non_float[0].name, non_float[0]
    readers = [str(n) for n in nodes if name in n.inputs]
    more = f" (and {len(non_float) - 1} more such input(s))" if len(non_float) > 1 else ""
    return UnsupportedError(
        f"graph input {name!r} has element type {info.dtype.upper()}{more}, read by "
        f"{', '.join(readers[:4]) or 'no node'}{', ...' if len(readers) > 4 else ''}; quantemu "
        "imports float32 models"
    )


def _kind(message: str) -> str:
    if "operator domain" in message:
        return "operator domain"
    if "supported operators:" in message:
        return "unknown operator"
    if "opset" in message:
        return "opset"
    return "unsupported attribute or value"


def _bind(inputs: list[TensorInfo], shapes: dict) -> list[TensorInfo]:
    """The graph inputs with the dimensions ``shapes`` gives bound (``load_onnx(shapes=)``)."""
    unknown = sorted(set(shapes) - {t.name for t in inputs})
    if unknown:
        raise InvalidInputError(
            f"no graph input named {', '.join(map(repr, unknown))}; inputs: "
            f"{', '.join(t.name for t in inputs)}"
        )
    return [
        TensorInfo(t.name, bound_shape(t, shapes[t.name]), t.dtype) if t.name in shapes else t
        for t in inputs
    ]


def _shape_hints(model, inputs: list[TensorInfo], *, infer: bool) -> dict[str, tuple]:
    """Shapes the file (or, with ``infer``, ONNX's shape inference from the bound ``inputs``)
    gives for values."""
    graph = model.graph
    if infer:
        bound = onnx.ModelProto()
        bound.CopyFrom(model)
        given = {t.name: t.shape for t in inputs}
        for value in bound.graph.input:
            for dim, size in zip(value.type.tensor_type.shape.dim, given.get(value.name, ()),
                                 strict=False):  # fmt: skip
                if isinstance(size, int):
                    dim.dim_value = size
        try:
            graph = onnx.shape_inference.infer_shapes(bound).graph
        except Exception:  # inference is a convenience here; the file's own infos remain
            graph = model.graph
    hints = {}
    for info in [*graph.value_info, *graph.output]:
        tensor_type = info.type.tensor_type
        if info.type.WhichOneof("value") == "tensor_type" and tensor_type.HasField("shape"):
            hints[info.name] = tuple(
                int(d.dim_value)
                if d.HasField("dim_value") and d.dim_value > 0
                else (d.dim_param or UNKNOWN_DIM)
                for d in tensor_type.shape.dim
            )
    return hints


def _float_const(name: str, value: np.ndarray) -> np.ndarray:
    """Float constants compute in float32; integer ones stay as they are (attribute inputs)."""
    if value.dtype.kind == "f" and value.dtype != np.float32:
        return value.astype(np.float32)
    return value


def _normalize_axes(overrides, tensors, initializers) -> dict[str, QuantOverride]:
    out = {}
    for name, params in overrides.items():
        out[name] = params
        if params.axis is not None and params.axis < 0 and name in tensors:
            rank = tensors[name].rank
            out[name] = QuantOverride(
                params.scale, params.zero_point, params.axis % rank, params.values, params.source
            )
    return out
