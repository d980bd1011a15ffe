"""Data movement: Flatten, Reshape, Transpose, Identity, Dropout, Squeeze, Unsqueeze, Gather,
Slice and Expand move int8 codes unchanged.

TFLite quantizes their output like their input, so they are exact. Tensors keep the graph's
layout (NCHW), so a Flatten before a Gemm flattens in the float model's order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, QTensor

MOVES = ("Flatten", "Reshape", "Transpose", "Identity", "Dropout", "Squeeze", "Unsqueeze")
#: Moves whose float kernel (which only selects or repeats elements) runs on the codes:
#: TFLite's GATHER, STRIDED_SLICE and BROADCAST_TO keep the input's quantization.
KERNEL_MOVES = ("Squeeze", "Unsqueeze", "Gather", "Slice", "Expand")
MOVES += KERNEL_MOVES[2:]


def _reshaped(node: Node, codes: np.ndarray) -> np.ndarray:
    attrs = node.attrs
    if node.op_type == "Flatten":
        axis = attrs["axis"]
        return codes.reshape(int(np.prod(codes.shape[:axis])), -1)
    if node.op_type == "Reshape":
        target = list(attrs["shape"])
        if not attrs.get("allowzero", 0):
            target = [codes.shape[i] if d == 0 else d for i, d in enumerate(target)]
        return codes.reshape(target)
    if node.op_type == "Transpose":
        return codes.transpose(attrs["perm"])
    if node.op_type in KERNEL_MOVES:
        return run_node(node, [codes])[0]  # the float kernel only moves elements
    return codes  # Identity, Dropout (inference)


@dataclass(frozen=True, eq=False, kw_only=True)
class MoveLayer(Layer):
    """Flatten / Reshape / Transpose / Identity / Dropout on int8 codes (exact)."""

    node: Node

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The same codes in the new shape, with the input's encoding."""
        return LayerOutput(QTensor(_reshaped(self.node, inputs[0].codes), inputs[0].encoding))


def lower_move(ctx: Xs3Context, node: Node) -> Layer:
    """A data-movement node: codes and encoding pass through."""
    ctx.same_as_input(node)
    op = "reshape" if node.op_type in ("Flatten", "Reshape") else node.op_type.lower()
    return ctx.layer(MoveLayer, node, op=op, inputs=node.inputs[:1], node=node)
