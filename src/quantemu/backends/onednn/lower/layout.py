"""Flatten / Reshape / Transpose / Squeeze / Unsqueeze / Gather / Slice / Expand / Identity /
Dropout: the codes move, their values and qparams do not."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor

#: Ops whose float kernel runs on the codes: it only selects or repeats elements (PyTorch
#: indexes, slices and expands quantized tensors keeping their qparams).
KERNEL_MOVES = ("Squeeze", "Unsqueeze", "Gather", "Slice", "Expand")


@dataclass(frozen=True, eq=False, kw_only=True)
class ReshapeLayer(U8Layer):
    """Flatten / Reshape / Transpose / Identity: the codes move, their values do not."""

    shape: tuple[int, ...] | None  # ONNX Reshape form (0 copies, -1 infers); None: keep
    flatten_axis: int | None
    perm: tuple[int, ...] | None
    squeeze: Node | None = None  # KERNEL_MOVES: the float kernel, which only moves elements

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        x = inputs[0].codes
        if self.flatten_axis is not None:
            lead = int(np.prod(x.shape[: self.flatten_axis]))
            x = x.reshape(lead, -1)
        elif self.shape is not None:
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(self.shape)]
            x = x.reshape(dims)
        elif self.perm is not None:
            x = np.ascontiguousarray(x.transpose(self.perm))
        elif self.squeeze is not None:
            x = run_node(self.squeeze, [x])[0]
        return LayerOutput(QTensor(x, self.encoding))


def lower_reshape(ctx: Context, node: Node) -> ReshapeLayer:
    """Flatten / Reshape / Transpose / Identity / Dropout: the codes move unchanged."""
    x = ctx.activation(node)
    a, op = node.attrs, node.op_type
    return ctx.layer(
        ReshapeLayer,
        node,
        op=op.lower(),
        inputs=(x,),
        shape=tuple(a["shape"]) if op == "Reshape" else None,
        flatten_axis=a["axis"] if op == "Flatten" else None,
        perm=tuple(a["perm"]) if op == "Transpose" else None,
        squeeze=node if op in KERNEL_MOVES else None,
    )
