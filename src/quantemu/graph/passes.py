"""Named graph passes: each takes a :class:`Graph` and returns an equivalent, simpler one.

=====================  ========================================================================
``relax_batch``        a fixed batch of 1 becomes symbolic where that provably changes no
                       sample's result (:mod:`.passes_shape`)
``remove_identity``    drop Identity and (inference) Dropout nodes, rewiring their readers
``fold_constants``     evaluate nodes whose inputs are all constants into initializers
``reduce_mean_to_pool``  ReduceMean over H and W becomes GlobalAveragePool (+ Flatten)
``fuse_matmul_add``    MatMul by a constant 2-D weight (+ a constant bias Add) becomes a Gemm,
                       between Reshapes for an N-D input (:mod:`.passes_linear`)
``div_by_constant``    Div by a constant power of two becomes Mul by its exact reciprocal
``fuse_hard_swish``    x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6 become HardSwish
``sink_squeeze``       a lifted 1-D op's Squeeze moves below the BatchNormalization and
                       activation after it, and cancels against an Unsqueeze (:mod:`.passes_shape`)
``fold_batchnorm``     fold an inference BatchNormalization into the Conv/ConvTranspose/Gemm
                       that feeds it (weights and bias rescaled, in float32)
``fuse_activation``    record a Relu / Clip / LeakyRelu on its producer (Conv, ConvTranspose,
                       Gemm, MatMul, Add, Sub, Mul) as ``activation=...`` and drop the node
=====================  ========================================================================

:data:`DEFAULT_PIPELINE` runs them in that order; :func:`run_passes` runs any list and can report
the graph after each pass (``quantemu inspect --dump-after PASS`` / ``--dump-passes``).

Rewrites never change the names of graph inputs or outputs, and a tensor that carries a
quantization override (a QDQ model) is never fused away: a fused tensor no longer exists, so
its override would be lost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Graph, Node
from quantemu.graph.ops.normalize import batchnorm_affine
from quantemu.graph.passes_linear import div_by_constant, fuse_hard_swish, fuse_matmul_add
from quantemu.graph.passes_shape import reduce_mean_to_pool, relax_batch, sink_squeeze


@dataclass(frozen=True)
class Pass:
    """A named graph-to-graph rewrite."""

    name: str
    description: str
    run: Callable[[Graph], Graph]


def _rename_uses(nodes: Iterable[Node], old: str, new: str) -> list[Node]:
    """``nodes`` with every read of ``old`` reading ``new`` instead."""
    return [
        dataclasses.replace(node, inputs=tuple(new if i == old else i for i in node.inputs))
        if old in node.inputs
        else node
        for node in nodes
    ]


def _bypass(graph: Graph, node: Node, replacement: Node | None) -> Graph:
    """Remove ``node`` (one input x, one output y): readers of y read x instead.

    When y is a graph output, the producer of x writes y directly (``replacement`` is the
    producer with its output renamed), so output names never change.
    """
    source, target = node.inputs[0], node.outputs[0]
    nodes = [n for n in graph.nodes if n is not node]
    if target in graph.outputs:
        producer = graph.producer(source)
        if producer is None or source in graph.outputs or replacement is None:
            return graph  # y must keep its name and x cannot be renamed: keep the node
        nodes = [replacement if n is producer else n for n in nodes]
        nodes = _rename_uses(nodes, source, target)
        overrides = _move_override(graph, source, target)
        return graph.replace(nodes=tuple(nodes), quant_overrides=overrides)
    return graph.replace(nodes=tuple(_rename_uses(nodes, target, source)))


def _move_override(graph: Graph, old: str, new: str) -> dict:
    overrides = dict(graph.quant_overrides)
    if old in overrides:
        overrides[new] = overrides.pop(old)
    return overrides


def _renamed_output(node: Node | None, old: str, new: str) -> Node | None:
    if node is None:
        return None
    outputs = tuple(new if o == old else o for o in node.outputs)
    return Node(node.name, node.op_type, node.inputs, outputs, node.attrs)


def remove_identity(graph: Graph) -> Graph:
    """Drop Identity and Dropout nodes (Dropout is the identity at inference)."""
    changed = True
    while changed:
        changed = False
        for node in graph.nodes:
            if node.op_type in ("Identity", "Dropout"):
                producer = graph.producer(node.inputs[0])
                new = _bypass(
                    graph, node, _renamed_output(producer, node.inputs[0], node.outputs[0])
                )
                if new is not graph:
                    graph, changed = new, True
                    break
    return graph


def fold_constants(graph: Graph) -> Graph:
    """Evaluate every node whose inputs are all initializers; its outputs become initializers."""
    initializers = dict(graph.initializers)
    nodes = []
    for node in graph.nodes:
        # a compiled custom op has no float meaning to fold: its backend runs it
        foldable = node.op_type not in ("TfliteCustom", "Unsupported")
        if foldable and node.inputs and all(not n or n in initializers for n in node.inputs):
            args = [initializers[n] if n else None for n in node.inputs]
            for name, value in zip(node.outputs, run_node(node, args), strict=False):
                initializers[name] = np.asarray(value, dtype=np.float32)
        else:
            nodes.append(node)
    if len(nodes) == len(graph.nodes):
        return graph
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


def _single_reader(graph: Graph, tensor: str) -> bool:
    return (
        tensor not in graph.outputs
        and tensor not in graph.quant_overrides
        and len(graph.consumers(tensor)) == 1
    )


def fold_batchnorm(graph: Graph) -> Graph:
    """Fold ``BatchNormalization(Conv(x))`` (and ConvTranspose, Gemm) into the producer.

    ``W' = W * m`` per output channel and ``b' = b * m + o``, where ``(m, o)`` is the batch
    norm's affine map (:func:`~quantemu.graph.ops.normalize.batchnorm_affine`), all in float32.
    """
    for node in graph.nodes:
        if node.op_type != "BatchNormalization":
            continue
        producer = graph.producer(node.inputs[0])
        folded = _fold_one(graph, node, producer) if producer is not None else None
        if folded is not None:
            return fold_batchnorm(folded)
    return graph


def _fold_one(graph: Graph, bn: Node, producer: Node) -> Graph | None:
    consts = graph.initializers
    if (
        producer.op_type not in ("Conv", "ConvTranspose", "Gemm")
        or "activation" in producer.attrs
        or not _single_reader(graph, producer.outputs[0])
        or not all(n in consts for n in (*bn.inputs[1:5], *producer.inputs[1:]))
    ):
        return None
    if producer.op_type == "Gemm" and (
        producer.attrs["transA"] or len(graph.tensors[bn.inputs[0]].shape) != 2
    ):
        return None
    multiplier, offset = batchnorm_affine(*(consts[n] for n in bn.inputs[1:5]), bn.attrs["epsilon"])
    weight = consts[producer.inputs[1]]
    channels = multiplier.size
    if producer.op_type == "Conv":
        new_w = weight * multiplier.reshape(-1, 1, 1, 1)
    elif producer.op_type == "ConvTranspose":
        g = producer.attrs["group"]
        shaped = weight.reshape(g, weight.shape[0] // g, channels // g, *weight.shape[2:])
        new_w = (shaped * multiplier.reshape(g, 1, channels // g, 1, 1)).reshape(weight.shape)
    else:  # Gemm: the output channel is B's column (transB=0) or row (transB=1)
        new_w = weight * (multiplier.reshape(-1, 1) if producer.attrs["transB"] else multiplier)
        new_w = new_w * np.float32(producer.attrs["alpha"])
    bias = _bias(graph, producer, channels)
    if bias is None:
        return None
    new_b = (bias * multiplier + offset).astype(np.float32)
    w_name, b_name = f"{producer.name}/folded_weight", f"{producer.name}/folded_bias"
    attrs = {"alpha": 1.0, "beta": 1.0} if producer.op_type == "Gemm" else {}
    fused = Node(
        producer.name,
        producer.op_type,
        (producer.inputs[0], w_name, b_name),
        bn.outputs,
        producer.attrs.merged(**attrs),
    )
    nodes = [fused if n is producer else n for n in graph.nodes if n is not bn]
    initializers = dict(graph.initializers)
    initializers.update({w_name: new_w.astype(np.float32), b_name: new_b})
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


def _bias(graph: Graph, producer: Node, channels: int) -> np.ndarray | None:
    """The producer's bias as a ``(channels,)`` vector (Gemm's beta applied), or None if odd."""
    if len(producer.inputs) < 3 or not producer.inputs[2]:
        return np.zeros(channels, dtype=np.float32)
    bias = graph.initializers[producer.inputs[2]]
    if producer.op_type == "Gemm":
        if bias.size not in (1, channels) or (bias.ndim == 2 and bias.shape[0] != 1):
            return None  # a per-row C cannot be folded into a per-column bias
        bias = np.broadcast_to(bias.reshape(-1), (channels,)) * np.float32(producer.attrs["beta"])
    return bias.astype(np.float32)


_FUSE_INTO = ("Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul")


def _activation_attrs(node: Node) -> dict | None:
    if node.op_type == "Relu":
        return {"activation": "relu"}
    if node.op_type == "Clip":
        return {
            "activation": "clip",
            "activation_min": node.attrs["min"],
            "activation_max": node.attrs["max"],
        }
    if node.op_type == "LeakyRelu":
        return {"activation": "leaky_relu", "activation_alpha": node.attrs["alpha"]}
    return None


def fuse_activation(graph: Graph) -> Graph:
    """Record each Relu / Clip / LeakyRelu on its producer; the producer takes its output name."""
    for node in graph.nodes:
        attrs = _activation_attrs(node)
        producer = graph.producer(node.inputs[0]) if attrs else None
        if (
            producer is None
            or producer.op_type not in _FUSE_INTO
            or "activation" in producer.attrs
            or not _single_reader(graph, node.inputs[0])
        ):
            continue
        fused = Node(
            producer.name,
            producer.op_type,
            producer.inputs,
            node.outputs,
            producer.attrs.merged(**attrs),
        )
        nodes = [fused if n is producer else n for n in graph.nodes if n is not node]
        return fuse_activation(graph.replace(nodes=tuple(nodes)))
    return graph


PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        Pass(
            "relax_batch",
            "make a fixed batch of 1 symbolic where that provably changes no sample's result",
            relax_batch,
        ),
        Pass("remove_identity", "drop Identity and inference-mode Dropout nodes", remove_identity),
        Pass("fold_constants", "evaluate nodes whose inputs are all constants", fold_constants),
        Pass(
            "reduce_mean_to_pool",
            "turn ReduceMean over H and W into GlobalAveragePool (+ Flatten)",
            reduce_mean_to_pool,
        ),
        Pass(
            "fuse_matmul_add",
            "turn MatMul by a constant weight (+ bias Add) into Gemm, reshaping an N-D input",
            fuse_matmul_add,
        ),
        Pass(
            "div_by_constant",
            "turn Div by a constant power of two into Mul by its reciprocal",
            div_by_constant,
        ),
        Pass(
            "fuse_hard_swish",
            "turn x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6 into HardSwish",
            fuse_hard_swish,
        ),
        Pass(
            "sink_squeeze",
            "move a 1-D op's Squeeze below the BatchNormalization/activation after it",
            sink_squeeze,
        ),
        Pass(
            "fold_batchnorm",
            "fold BatchNormalization into the Conv/ConvTranspose/Gemm before it",
            fold_batchnorm,
        ),
        Pass(
            "fuse_activation",
            "fuse Relu/Clip/LeakyRelu into the Conv/Gemm/MatMul/Add/Sub/Mul before it",
            fuse_activation,
        ),
    )
}
DEFAULT_PIPELINE: tuple[str, ...] = tuple(PASSES)


def run_passes(
    graph: Graph,
    names: Sequence[str] | None = None,
    *,
    on_pass: Callable[[str, Graph], None] | None = None,
) -> Graph:
    """Run the passes ``names`` (default :data:`DEFAULT_PIPELINE`) in order.

    ``on_pass(name, graph)`` is called with the graph after each pass (for dumps).
    """
    names = DEFAULT_PIPELINE if names is None else tuple(names)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise InvalidInputError(
            f"unknown pass {', '.join(map(repr, unknown))}; passes: {', '.join(PASSES)}"
        )
    for name in names:
        graph = PASSES[name].run(graph)
        if on_pass is not None:
            on_pass(name, graph)
    return graph


def optimize(graph: Graph) -> Graph:
    """The graph after :data:`DEFAULT_PIPELINE`."""
    return run_passes(graph)
