"""Concat in FP16: the inputs placed side by side in memory; fp16 words need no requantization.

(Flatten, Reshape, Transpose and the other layout ops reuse the INT8 lowering's
:func:`~quantemu.backends.nvdla.lower.layout.lower_layout`: it moves codes of any encoding.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.graph.ir import Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext


@dataclass(frozen=True, kw_only=True)
class Fp16ConcatLayer(Layer):
    """Concat of fp16 words along ``axis``."""

    encoding: Encoding
    axis: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Concatenate; no arithmetic, no counters."""
        y = np.concatenate([np.asarray(t.codes) for t in inputs], axis=self.axis)
        return LayerOutput(QTensor(y, self.encoding), {})


def lower_concat_fp16(ctx: LoweringContext, node: Node) -> Fp16ConcatLayer:
    """Concat of computed tensors (a constant input is not an NVDLA surface)."""
    if any(ctx.const(i) is not None for i in node.inputs):
        raise ctx.unsupported(node, "a constant Concat input")
    return ctx.layer(Fp16ConcatLayer, node, op="concat", inputs=node.inputs,
                     note="memory placement", encoding=ctx.new_encoding(node.outputs[0]),
                     axis=int(node.attrs["axis"]))  # fmt: skip
