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
