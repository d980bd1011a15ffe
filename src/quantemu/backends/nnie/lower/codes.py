"""Layers on the codes themselves: Flatten, Reshape, Identity, Dropout and Relu.

MQBench exports no clip for these; applied to the uint8 codes they are exact for any NNIE
implementation (a reshape moves codes, Relu turns negative codes into ``0x80``), and the output
keeps the input's encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.encoding import LogEncoding
from quantemu.backends.nnie.ops import CODE_ZERO, SIGN_BIT
from quantemu.errors import UnsupportedError
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program.encoding import QTensor
from quantemu.program.layer import Layer, LayerOutput

# Applied to the codes, keeping the input's encoding (MQBench exports no clip for them).
# Gather / Slice / Expand with constant indices only select or repeat bytes.
CODE_OPS = ("Dropout", "Flatten", "Identity", "Relu", "Reshape", "Squeeze", "Unsqueeze", "Gather",
            "Slice", "Expand")  # fmt: skip


@dataclass(frozen=True, eq=False, kw_only=True)
class CodeLayer(Layer):
    """Flatten / Reshape / Identity / Dropout / Relu on the codes; ``encoding``, the input's,
    is kept. Relu counts ``negatives_zeroed``."""

    node: Node
    encoding: LogEncoding

    def compute(self, inputs: Sequence[QTensor]) -> LayerOutput:
        tensor = inputs[0]
        if self.node.op_type == "Relu":
            # Negative codes (sign bit set, 0x81..0xFF) become zero (0x80); 0x80 stays.
            codes = np.where(tensor.codes > SIGN_BIT, np.uint8(CODE_ZERO), tensor.codes)
            zeroed = int(np.count_nonzero(tensor.codes > SIGN_BIT))
            return LayerOutput(QTensor(codes, tensor.encoding), {"negatives_zeroed": zeroed})
        codes = run_node(self.node, [tensor.codes])[0]  # a pure data movement of the bytes
        return LayerOutput(QTensor(codes, tensor.encoding), {})


def code_rule(ctx: NnieContext, node: Node) -> CodeLayer:
    """``codes:<Op>``: the node on its single computed input's codes."""
    source = ctx.data_inputs(node)
    if len(source) != 1 or len(node.inputs) != 1:
        raise UnsupportedError(
            f"nnie: {node} must read exactly one computed tensor to run on codes, got inputs "
            f"{list(node.inputs)}"
        )
    note = "negative codes -> 0x80 (exact)" if node.op_type == "Relu" else "moves codes (exact)"
    op, encoding = f"codes:{node.op_type}", ctx.stored(source[0])
    return ctx.layer(CodeLayer, node, op=op, inputs=source, note=note, node=node, encoding=encoding)
