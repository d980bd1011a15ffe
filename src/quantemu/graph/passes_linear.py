"""Passes that give exported Linear layers and constant divisions the form targets compile.

``fuse_matmul_add``: PyTorch exports ``nn.Linear`` on a 3-D input (N, T, C), the Linear of every
transformer block, as ``MatMul(x, W^T)`` followed by ``Add(bias)``, and sometimes a 2-D Linear
too. Every target's toolchain compiles that as one fully-connected layer with the bias in its
int32 accumulator (TFLite's FULLY_CONNECTED flattens the leading dims, PyTorch's quantized
linear does the same). The pass rewrites ``MatMul(x, W) [+ b]`` with a constant 2-D ``W`` into
``Gemm(x, W, b)`` (``transB=0``); for an N-D ``x`` of shape (..., K) it becomes
``Reshape(x, (-1, K)) -> Gemm -> Reshape(..., N)``, the leading dims copied with Reshape's ``0``
so a symbolic batch stays right. A bias is fused only when it is a constant that broadcasts to
``(N,)`` and the MatMul output has no other reader and no quantization override (a QDQ model
quantizes it on its own).

``div_by_constant``: ``Div(x, c)`` with a constant ``c`` becomes ``Mul(x, 1/c)`` when ``c`` is a
power of two, where ``1/c`` is exact in float32 and the product equals the quotient bit for bit.
Other constants keep their Div: ``x * float32(1/c)`` differs from ``x / c`` in the last bit for
some ``x``, and the float reference must stay equal to onnxruntime.

``fuse_hard_swish``: exporters write hard-swish as ``x * HardSigmoid(x)`` (opsets before 14) or,
from hand-written code, as ``x * Clip(x + 3, 0, 6) / 6`` (Relu6 exports as that Clip); the pass
makes them one ``HardSwish`` node, which TFLite runs as HARD_SWISH. Only forms that hold a
HardSigmoid or a Div by 6 are fused: no fixed-point target here runs either, so nothing that ran
before is lost. ``x * Clip(x + 3, 0, 6) * (1/6)`` stays as it is: NVDLA and NNIE run those
element-wise ops, and their toolchains have no hard-swish to fuse it into.
"""

from __future__ import annotations

import numpy as np

from quantemu.graph.ir import Graph, Node

# -- MatMul (+ Add) -> Gemm -------------------------------------------------------------------


def fuse_matmul_add(graph: Graph) -> Graph:
    """Rewrite every ``MatMul(x, W constant) [+ bias]`` as a Gemm (module docstring)."""
    for node in graph.nodes:
        if node.op_type != "MatMul":
            continue
        rewritten = _rewrite_matmul(graph, node)
        if rewritten is not None:
            return fuse_matmul_add(rewritten)
    return graph


def _weight(graph: Graph, node: Node) -> np.ndarray | None:
    w = graph.initializers.get(node.inputs[1])
    return w if w is not None and w.ndim == 2 and "activation" not in node.attrs else None


def _bias_add(graph: Graph, node: Node, channels: int) -> tuple[Node, str, np.ndarray] | None:
    """The Add reading only the MatMul's output with a constant bias of ``(channels,)``, the
    bias's name and its value as a ``(channels,)`` vector."""
    y = node.outputs[0]
    readers = graph.consumers(y)
    if y in graph.outputs or y in graph.quant_overrides or len(readers) != 1:
        return None
    add = readers[0]
    if add.op_type != "Add" or "activation" in add.attrs or len(add.inputs) != 2:
        return None
    other = add.inputs[1] if add.inputs[0] == y else add.inputs[0]
    bias = graph.initializers.get(other)
    if other == y or bias is None:
        return None
    out_rank = graph.tensors[y].rank
    # the bias must broadcast along the channel axis only, without growing the output's rank
    if bias.ndim > out_rank or any(d != 1 for d in bias.shape[:-1]):
        return None
    if bias.ndim and bias.shape[-1] not in (1, channels):
        return None
    if bias.shape == (channels,) and bias.dtype == np.float32:
        return add, other, bias  # its name, and a QDQ model's override of it, stay
    if other in graph.quant_overrides:
        return None  # a reshaped copy would lose the bias's quantization
    return add, "", np.broadcast_to(bias.reshape(-1), (channels,)).astype(np.float32)


def _rewrite_matmul(graph: Graph, node: Node) -> Graph | None:
    w = _weight(graph, node)
    x_info = graph.tensors[node.inputs[0]]
    if w is None or x_info.rank < 2:
        return None
    k, channels = w.shape
    target = _unflatten_target(x_info.shape, channels)
    fused = _bias_add(graph, node, channels)
    if target is None or (fused is None and x_info.rank == 2):
        return None  # a plain 2-D MatMul already lowers as a fully-connected layer
    last = fused[0] if fused else node
    inputs = [node.inputs[1]]
    initializers = dict(graph.initializers)
    if fused:
        b_name = fused[1] or f"{node.name}/bias"
        initializers[b_name] = fused[2]
        inputs.append(b_name)
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}
    overrides = dict(graph.quant_overrides)
    if x_info.rank == 2:
        new = [Node(node.name, "Gemm", (node.inputs[0], *inputs), last.outputs, attrs)]
        removed = [last]
    else:
        flatten = Node(
            f"{node.name}/flatten",
            "Reshape",
            (node.inputs[:1]),
            (f"{node.name}/flat",),
            _shape(-1, k),
        )
        gemm = Node(node.name, "Gemm", (flatten.outputs[0], *inputs), (f"{node.name}/gemm",), attrs)
        new, removed = [flatten, gemm], [last]
        act = _activation_after(graph, last.outputs[0])
        if act is not None:  # Gemm -> act -> unflatten, so fuse_activation puts it on the Gemm
            new.append(Node(act.name, act.op_type, gemm.outputs, (f"{node.name}/act",), act.attrs))
            removed.append(act)
        final = removed[-1].outputs[0]
        new.append(
            Node(f"{node.name}/unflatten", "Reshape", new[-1].outputs, (final,), _shape(*target))
        )
        if final in overrides:  # the unflatten only moves codes
            overrides[new[-1].inputs[0]] = overrides[final]
    nodes: list[Node] = []
    for n in graph.nodes:
        if n is node:
            nodes.extend(new)
        elif all(n is not r for r in removed):
            nodes.append(n)
    return graph.replace(nodes=tuple(nodes), initializers=initializers, quant_overrides=overrides)


def _shape(*target: int) -> dict:
    return {"shape": tuple(target), "allowzero": 0}


def _activation_after(graph: Graph, tensor: str) -> Node | None:
    """The Relu / Clip / LeakyRelu that alone reads ``tensor`` (it commutes with a Reshape)."""
    if not _private(graph, tensor):
        return None
    (reader,) = graph.consumers(tensor)
    ok = reader.op_type in ("Relu", "Clip", "LeakyRelu") and reader.inputs == (tensor,)
    return reader if ok else None


def _unflatten_target(x_shape: tuple, channels: int) -> tuple[int, ...] | None:
    """The Reshape target that restores ``x``'s leading dims from the flat ``(rows, N)`` Gemm.

    The Gemm output has rank 2, so ONNX's ``0`` (copy the input's dim) cannot reach ``x``'s
    leading dims: known ones are written out and one symbolic one (the batch) becomes ``-1``.
    With two symbolic dims no constant target is right for every size (None: no rewrite).
    """
    dims = x_shape[:-1]
    if sum(not isinstance(d, int) for d in dims) > 1:
        return None
    return (*(d if isinstance(d, int) else -1 for d in dims), channels)


# -- Div by a constant -------------------------------------------------------------------------


def _power_of_two_reciprocal(c: np.ndarray) -> np.ndarray | None:
    """``1 / c`` when every element of ``c`` is a (signed) power of two, else None."""
    if c.dtype != np.float32 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c == 0):
        return None
    mantissa, _ = np.frexp(np.abs(c))
    if not np.all(mantissa == 0.5):
        return None
    recip = (np.float32(1) / c).astype(np.float32)
    # the reciprocal of a tiny power of two may overflow or be subnormal: not exact then
    if not np.all(np.isfinite(recip)) or np.any(np.frexp(np.abs(recip))[0] != 0.5):
        return None
    return recip


def div_by_constant(graph: Graph) -> Graph:
    """``Div(x, c)`` with ``c`` a constant power of two -> ``Mul(x, 1/c)`` (module docstring)."""
    nodes, initializers, changed = [], dict(graph.initializers), False
    for node in graph.nodes:
        divisor = graph.initializers.get(node.inputs[1]) if node.op_type == "Div" else None
        recip = _power_of_two_reciprocal(divisor) if divisor is not None else None
        if recip is None or node.inputs[0] in graph.initializers:
            nodes.append(node)
            continue
        name = f"{node.name}/reciprocal"
        initializers[name] = recip
        nodes.append(Node(node.name, "Mul", (node.inputs[0], name), node.outputs, node.attrs))
        changed = True
    if not changed:
        return graph
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


# -- hard-swish --------------------------------------------------------------------------------

_SIXTH = np.float32(1 / 6)


def _private(graph: Graph, tensor: str) -> bool:
    """``tensor`` can vanish in a fusion: one reader, not an output, no override."""
    return (
        tensor not in graph.outputs
        and tensor not in graph.quant_overrides
        and len(graph.consumers(tensor)) == 1
    )


def _const_operand(graph: Graph, node: Node) -> tuple[str, float] | None:
    """``(other input, scalar constant)`` of a binary node with one scalar-constant operand."""
    if len(node.inputs) != 2 or "activation" in node.attrs:
        return None
    for i in (0, 1):
        value = graph.initializers.get(node.inputs[i])
        other = node.inputs[1 - i]
        if value is not None and value.size == 1 and other not in graph.initializers:
            if node.op_type in ("Div", "Sub") and i == 0:
                return None  # c / x and c - x are no scaling of x
            return other, float(value.reshape(()))
    return None


def _sixth_of(graph: Graph, node: Node | None) -> str | None:
    """The tensor ``p`` when ``node`` computes ``p / 6`` or ``p * (1/6)``."""
    if node is None or node.op_type not in ("Div", "Mul"):
        return None
    found = _const_operand(graph, node)
    if found is None:
        return None
    other, c = found
    if (node.op_type == "Div" and c == 6.0) or (node.op_type == "Mul" and np.float32(c) == _SIXTH):
        return other
    return None


def _relu6_of_x_plus_3(graph: Graph, tensor: str) -> tuple[str, list[Node]] | None:
    """``(x, [Add, Clip])`` when ``tensor`` is ``Clip(x + 3, 0, 6)`` (how Relu6 exports)."""
    clip = graph.producer(tensor)
    if clip is None or clip.op_type != "Clip" or "activation" in clip.attrs:
        return None
    if (clip.attrs["min"], clip.attrs["max"]) != (0.0, 6.0) or not _private(graph, clip.inputs[0]):
        return None
    add = graph.producer(clip.inputs[0])
    found = _const_operand(graph, add) if add is not None and add.op_type == "Add" else None
    if found is None or found[1] != 3.0:
        return None
    return found[0], [add, clip]


def _gate(graph: Graph, tensor: str) -> tuple[str, list[Node]] | None:
    """``(x, nodes)`` when ``tensor`` is HardSigmoid(x) with hard-swish's constants, or
    ``Clip(x + 3, 0, 6) / 6``."""
    if not _private(graph, tensor):
        return None
    node = graph.producer(tensor)
    if node is not None and node.op_type == "HardSigmoid":
        if np.float32(node.attrs["alpha"]) == _SIXTH and node.attrs["beta"] == 0.5:
            return node.inputs[0], [node]
        return None
    inner = _sixth_of(graph, node)
    if inner is None or not _private(graph, inner):
        return None
    found = _relu6_of_x_plus_3(graph, inner)
    return (found[0], [*found[1], node]) if found else None


def _hard_swish_match(graph: Graph, node: Node) -> tuple[str, list[Node]] | None:
    """``(x, nodes replaced)`` when ``node`` writes hard-swish of ``x`` (module docstring)."""
    if node.op_type == "Mul" and "activation" not in node.attrs and len(node.inputs) == 2:
        for i in (0, 1):  # x * gate
            found = _gate(graph, node.inputs[i])
            if found and found[0] == node.inputs[1 - i]:
                return found[0], [*found[1], node]
    outer = _sixth_of(graph, node)  # (x * Clip(x + 3, 0, 6)) / 6
    product = graph.producer(outer) if outer and _private(graph, outer) else None
    if product is None or product.op_type != "Mul" or "activation" in product.attrs:
        return None
    for i in (0, 1):
        found = _relu6_of_x_plus_3(graph, product.inputs[i])
        if found and found[0] == product.inputs[1 - i] and _private(graph, product.inputs[i]):
            return found[0], [*found[1], product, node]
    return None


def fuse_hard_swish(graph: Graph) -> Graph:
    """Replace each hard-swish written out of primitives by one HardSwish node."""
    for node in graph.nodes:
        match = _hard_swish_match(graph, node) if node.op_type in ("Mul", "Div") else None
        if match is None:
            continue
        x, fused = match
        if not any(n.op_type in ("HardSigmoid", "Div") for n in fused):
            continue  # module docstring: every target already runs the all-Mul form
        hard_swish = Node(node.name, "HardSwish", (x,), node.outputs)
        gone = {n.name for n in fused}
        nodes = [
            hard_swish if n is node else n for n in graph.nodes if n.name not in gone - {node.name}
        ]
        return fuse_hard_swish(graph.replace(nodes=tuple(nodes)))
    return graph
