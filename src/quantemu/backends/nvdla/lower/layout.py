"""Layout ops and Concat: data placement with no arithmetic, or an SDP requantization.

* Flatten / Reshape / Transpose move int8 codes without arithmetic (memory layout: the
  compiler reinterprets or the Rubik engine / CPU moves the surface); codes and scale unchanged.
* Concat places its inputs side by side in memory; an input whose scale differs from the
  output's is first requantized by an SDP pass (output converter ``s_i / s_out``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.lower.sdp import SdpStage, activation_stage, run_stages, sdp_counters
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

# Gather / Slice / Expand with constant indices select or repeat surface elements: a memory
# placement (the compiler's split/slice and broadcast read a sub-surface), no arithmetic.
LAYOUT_OPS = (
    "Flatten",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Gather",
    "Slice",
    "Expand",
)


@dataclass(frozen=True, kw_only=True)
class LayoutLayer(Layer):
    """A data movement: the graph's own kernel applied to the codes."""

    encoding: LinearEncoding
    node: Node

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Reshape / transpose the int8 codes; no counters."""
        (y,) = run_node(self.node, [np.asarray(inputs[0].codes)])
        return LayerOutput(QTensor(np.ascontiguousarray(y), self.encoding), {})


def lower_layout(ctx: NvdlaContext, node: Node) -> LayoutLayer:
    """Flatten / Reshape / Transpose: codes and scale unchanged."""
    return ctx.layer(LayoutLayer, node, op="layout_" + node.op_type.lower(),
                     inputs=node.inputs[:1], note="memory layout only",
                     encoding=ctx.encoding(node.inputs[0]), node=node)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ConcatLayer(Layer):
    """Concat: per-input SDP requantization passes (where scales differ), then placement."""

    encoding: LinearEncoding
    stages: tuple[SdpStage | None, ...]  # per input; None = same scale, copied as is
    axis: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Requantize the inputs that need it and concatenate along ``axis``."""
        parts, results = [], []
        for stage, t in zip(self.stages, inputs, strict=True):
            y, r = run_stages(() if stage is None else (stage,), np.asarray(t.codes))
            parts.append(y.astype(np.int8, copy=False))
            results.extend(r)
        y = np.concatenate(parts, axis=self.axis)
        return LayerOutput(QTensor(y, self.encoding), sdp_counters(results))


def lower_concat(ctx: NvdlaContext, node: Node) -> ConcatLayer:
    """Concat of computed tensors; constant inputs are not supported by the SDP path."""
    if any(ctx.const(i) is not None for i in node.inputs):
        raise ctx.unsupported(node, "a constant Concat input")
    enc = ctx.new_encoding(node.outputs[0])
    stages = []
    for name in node.inputs:
        s_in = ctx.encoding(name).scale
        same = np.float32(s_in) == np.float32(enc.scale)
        stages.append(None if same else activation_stage(None, {}, s_in, enc.scale))
    n = sum(s is not None for s in stages)
    note = f"{n} input(s) requantized by an SDP pass" if n else "all inputs share the scale"
    return ctx.layer(ConcatLayer, node, op="concat", inputs=node.inputs, note=note, encoding=enc,
                     stages=tuple(stages), axis=int(node.attrs["axis"]))  # fmt: skip
