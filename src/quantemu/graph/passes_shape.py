"""Passes that make exported models take what users give them: any batch, and pooling as pooling.

``relax_batch``: today's exporters write a fixed batch of 1 (``torch.onnx.export(model, (x,))``).
The pass makes a fixed leading 1 of every graph input symbolic, rewrites each Reshape whose
target starts with that 1 to keep the batch instead (``-1`` or ONNX's ``0``), and then *checks*
the result on random data: the relaxed graph on two samples must give, per sample, what the
original graph gives on each alone (same shapes; values equal up to float32 summation order).
Anything else (a reshape that moves the batch, an op that mixes samples) keeps the original
graph; calibration and evaluation then feed it batches of the model's own size
(:func:`fixed_batch`).

``reduce_mean_to_pool``: exporters write global average pooling as ``ReduceMean`` over H and W;
targets have a global pooling unit (NVDLA's PDP, NNIE, XS3's avgpool) for it. A 4-D ReduceMean
over axes (2, 3) becomes ``GlobalAveragePool`` (plus a ``Flatten`` when ``keepdims=0``).

``sink_squeeze``: a 1-D convolution or pool is imported as the 2-D op between an Unsqueeze and a
Squeeze of axis 2 (:mod:`.onnx_lift_1d`), which would stand between the convolution and the
BatchNormalization and activation that the converters fold into it (TensorFlow's writes a
Conv1D with its ReLU fused into the CONV_2D). The Squeeze moves below the per-channel ops that
read it (BatchNormalization, Relu, Clip, LeakyRelu: they act on axis 1 or elementwise, so they
commute with it), and a Squeeze followed by an Unsqueeze of the same axis cancels.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantemu.errors import QuantemuError
from quantemu.graph.ir import Graph, Node, TensorInfo

BATCH = "batch"


def bind_from_data(graph: Graph, x) -> Graph:
    """The single input's symbolic dimensions beyond the batch bound from the data's shape
    (a model exported with dynamic height and width, say); the graph as it is otherwise."""
    if len(graph.inputs) != 1 or not isinstance(x, np.ndarray):
        return graph
    info = graph.inputs[0]
    if all(isinstance(d, int) for d in info.shape[1:]) or x.ndim != info.rank:
        return graph
    return graph.with_input_shapes({info.name: (None, *x.shape[1:])})


def symbolic_input_dims(graph: Graph) -> list[str]:
    """``name: shape`` of every input with a symbolic dimension beyond the batch."""
    return [
        f"{i.name}: {'x'.join(map(str, i.shape))}"
        for i in graph.inputs
        if not all(isinstance(d, int) for d in i.shape[1:])
    ]


def fixed_batch(graph: Graph) -> int | None:
    """The fixed leading dimension every graph input shares (``None`` when it is symbolic)."""
    dims = {info.shape[0] for info in graph.inputs if info.shape}
    if len(dims) == 1:
        (dim,) = dims
        return dim if isinstance(dim, int) else None
    return None


def relax_batch(graph: Graph) -> Graph:
    """A symbolic batch where a fixed batch of 1 can be relaxed safely (module docstring)."""
    if fixed_batch(graph) != 1 or any(len(i.shape) < 2 for i in graph.inputs):
        return graph
    inputs = tuple(TensorInfo(i.name, (BATCH, *i.shape[1:]), i.dtype) for i in graph.inputs)
    nodes = tuple(_copy_batch(node) for node in graph.nodes)
    try:
        relaxed = graph.replace(inputs=inputs, nodes=nodes)
    except QuantemuError:
        return graph
    return relaxed if _same_per_sample(graph, relaxed) else graph


def _copy_batch(node: Node) -> Node:
    """A Reshape whose target starts with the old batch of 1 keeps the batch instead: ``-1``
    (the only free size: also right under ``allowzero=1``, which today's exporter writes), else
    ONNX's ``0`` (copy the input's dimension)."""
    shape = node.attrs.get("shape") if node.op_type == "Reshape" else None
    if not shape or shape[0] != 1:
        return node
    rest = tuple(shape[1:])
    if -1 not in rest and (0 not in rest or not node.attrs.get("allowzero", 0)):
        return node.with_attrs(shape=(-1, *rest))
    if not node.attrs.get("allowzero", 0):
        return node.with_attrs(shape=(0, *rest))
    return node


def _same_per_sample(original: Graph, relaxed: Graph) -> bool:
    """The relaxed graph on two samples equals the original on each sample alone."""
    if not all(info.is_static or info.shape[0] == BATCH for info in relaxed.inputs):
        return False
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal((2, *i.shape[1:])).astype(np.float32)
        for i in relaxed.inputs
        if all(isinstance(d, int) for d in i.shape[1:])
    }
    if len(feeds) != len(relaxed.inputs):
        return False
    try:
        both = relaxed.run_float(feeds)
        alone = [original.run_float({k: v[k_ : k_ + 1] for k, v in feeds.items()}) for k_ in (0, 1)]
    except (QuantemuError, ValueError, IndexError):
        return False
    for name in relaxed.outputs:
        got = both[name]
        if (
            got.ndim == 0
            or got.shape[0] != 2
            or not all(_close(got[k : k + 1], alone[k][name]) for k in (0, 1))
        ):
            return False
    return True


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to float32 summation order (BLAS blocks a batch of 2 and of 1 differently); a
    reshape that mixes samples is off by the data's own magnitude."""
    if a.shape != b.shape:
        return False
    # Only finite values set the scale: an inf (from an inf or NaN weight) would make the
    # tolerance infinite and accept any difference.
    finite = np.abs(b[np.isfinite(b)])
    scale = float(np.max(finite)) if finite.size else 0.0
    return bool(np.allclose(a, b, rtol=1e-4, atol=1e-5 * max(scale, 1e-30), equal_nan=True))


def reduce_mean_to_pool(graph: Graph) -> Graph:
    """ReduceMean over H, W of an NCHW tensor -> GlobalAveragePool (+ Flatten)."""
    nodes: list[Node] = []
    overrides = dict(graph.quant_overrides)
    changed = False
    for node in graph.nodes:
        x = node.inputs[0] if node.inputs else ""
        if (
            node.op_type != "ReduceMean"
            or graph.tensors[x].rank != 4
            or tuple(node.attrs["axes"]) != (2, 3)
        ):
            nodes.append(node)
            continue
        changed = True
        if node.attrs["keepdims"]:
            nodes.append(Node(node.name, "GlobalAveragePool", (x,), node.outputs))
            continue
        pooled = f"{node.outputs[0]}/pooled"
        nodes.append(Node(node.name, "GlobalAveragePool", (x,), (pooled,)))
        nodes.append(Node(f"{node.name}/flatten", "Flatten", (pooled,), node.outputs, {"axis": 1}))
        if node.outputs[0] in overrides:  # the flatten only moves codes
            overrides[pooled] = overrides[node.outputs[0]]
    if not changed:
        return graph
    return dataclasses.replace(graph, nodes=tuple(nodes), quant_overrides=overrides)


#: Ops that act per channel (axis 1) or elementwise: a Squeeze of axis 2 commutes with them.
_PER_CHANNEL = ("BatchNormalization", "Relu", "Clip", "LeakyRelu")


def sink_squeeze(graph: Graph) -> Graph:
    """Move each Squeeze of axis 2 of a 4-D tensor below the per-channel ops reading it, and
    cancel it against an Unsqueeze of axis 2 (module docstring)."""
    for node in graph.nodes:
        rewritten = _sink_one(graph, node)
        if rewritten is not None:
            return sink_squeeze(rewritten)
    return graph


def _axis_2_of_4d(graph: Graph, node: Node, op_type: str) -> bool:
    return (
        node.op_type == op_type
        and tuple(node.attrs["axes"]) == (2,)
        and graph.tensors[node.outputs[0] if op_type == "Unsqueeze" else node.inputs[0]].rank == 4
    )


def _sink_one(graph: Graph, squeeze: Node) -> Graph | None:
    """``graph`` with ``squeeze`` moved below its single reader or cancelled, else None."""
    if not _axis_2_of_4d(graph, squeeze, "Squeeze"):
        return None
    y = squeeze.outputs[0]
    readers = graph.consumers(y)
    # a tensor with a name outside (an output) or an override must keep existing
    if y in graph.outputs or y in graph.quant_overrides or len(readers) != 1:
        return None
    (reader,) = readers
    if _axis_2_of_4d(graph, reader, "Unsqueeze"):
        z = reader.outputs[0]
        if z in graph.outputs or z in graph.quant_overrides:
            return None
        nodes = [n for n in graph.nodes if n is not squeeze and n is not reader]
        return graph.replace(nodes=tuple(_read_instead(nodes, z, squeeze.inputs[0])))
    if reader.op_type not in _PER_CHANNEL or reader.inputs.count(y) != 1 or reader.inputs[0] != y:
        return None
    out = reader.outputs[0]
    moved = _fresh(graph, f"{out}/4d")
    before = dataclasses.replace(reader, inputs=(squeeze.inputs[0], *reader.inputs[1:]),
                                 outputs=(moved,))  # fmt: skip
    after = dataclasses.replace(squeeze, inputs=(moved,), outputs=(out,))
    nodes = []
    for node in graph.nodes:
        if node is reader:
            nodes += [before, after]
        elif node is not squeeze:
            nodes.append(node)
    overrides = dict(graph.quant_overrides)
    if out in overrides:  # the Squeeze only moves codes
        overrides[moved] = overrides[out]
    return graph.replace(nodes=tuple(nodes), quant_overrides=overrides)


def _read_instead(nodes: list[Node], old: str, new: str) -> list[Node]:
    return [
        dataclasses.replace(n, inputs=tuple(new if i == old else i for i in n.inputs))
        for n in nodes
    ]


def _fresh(graph: Graph, name: str) -> str:
    candidate, k = name, 1
    while candidate in graph.tensors:
        k += 1
        candidate = f"{name}_{k}"
    return candidate
