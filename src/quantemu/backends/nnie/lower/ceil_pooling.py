"""NNIE pools with Caffe's ceil rounding: the network it runs, not the one the model states.

NNIE's toolchain (Caffe-based) computes every pooled size with ceil, whatever the ONNX model's
``ceil_mode`` says (seed 003, MQBench's NNIE page: "pooling must use ceil_mode"). Where floor
and ceil give different sizes (ResNet's 3x3/2 max pool on an even input: 16x16 in the model,
17x17 on NNIE), every layer after that pool runs at NNIE's shapes. quantemu simulates what the
target computes: this rewrite (the backend's ``prepare``, made before calibration) sets
``ceil_mode=1`` on those pools, so calibration, the integer layers and the float reference all
see NNIE's network, and records each changed pool in the graph's metadata; the lowered model's
header and the pool layer's note say so. Caffe drops a last window that would start in the
padding, as ONNX's ceil mode does, so the two agree on every size.
"""

from __future__ import annotations

from quantemu.graph.ir import Graph, Node
from quantemu.graph.ops.pool import pool_out_dim

POOLS = ("MaxPool", "AveragePool")
#: ``graph.metadata`` key: the pools rewritten, ``name: floor HxW -> ceil HxW`` joined by "; ".
METADATA_KEY = "nnie_ceil_pooling"


def _sizes(graph: Graph, node: Node) -> tuple[tuple, tuple] | None:
    """The pooled (H, W) with floor and with ceil, or None where a size is symbolic."""
    shape = graph.tensors[node.inputs[0]].shape
    if len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]):
        return None
    a = node.attrs
    pt, pl, pb, pr = a["pads"]
    pads = ((pt, pb), (pl, pr))
    axes = list(zip(shape[2:], a["kernel_shape"], a["strides"], a["dilations"], pads, strict=True))
    return tuple(
        tuple(pool_out_dim(size, k, s, d, p, ceil=ceil) for size, k, s, d, p in axes)
        for ceil in (False, True)
    )  # type: ignore[return-value]


def ceil_pooling(graph: Graph) -> Graph:
    """``graph`` with every floor-mode pool whose size ceil rounding changes set to ceil mode
    (module docstring); the same graph when there is none."""
    changed: list[str] = []
    nodes = []
    for node in graph.nodes:
        if node.op_type in POOLS and not int(node.attrs.get("ceil_mode", 0)):
            sizes = _sizes(graph, node)
            if sizes is not None and sizes[0] != sizes[1]:
                floor, ceil = ("x".join(map(str, s)) for s in sizes)
                changed.append(f"{node.name}: {floor} -> {ceil}")
                nodes.append(node.with_attrs(ceil_mode=1))
                continue
        nodes.append(node)
    if not changed:
        return graph
    metadata = {**graph.metadata, METADATA_KEY: "; ".join(changed)}
    return graph.replace(nodes=tuple(nodes), metadata=metadata)
