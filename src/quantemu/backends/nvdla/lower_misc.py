"""Layout ops, Concat, and the float (CPU) fallback of the NVDLA lowering.

* Flatten / Reshape / Transpose move int8 codes without arithmetic (memory layout: the
  compiler reinterprets or the Rubik engine / CPU moves the surface); codes and scale unchanged.
* Concat places its inputs side by side in memory; an input whose scale differs from the
  output's is first requantized by an SDP pass (output converter ``s_i / s_out``).
* Softmax is not an NVDLA operation: nvdla/sw runs it on the CPU (``CPUNode``). quantemu does
  the same in float32: dequantize, the float executor's kernel, requantize to the output's int8
  encoding (round half to even). Such layers have ``exact=False``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower_scales import Context
from quantemu.backends.nvdla.lower_sdp import SdpStage, activation_stage, run_stages, sdp_counters
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

LAYOUT_OPS = ("Flatten", "Reshape", "Transpose")
CPU_OPS = ("Softmax",)


@dataclass(frozen=True, kw_only=True)
class LayoutLayer(Layer):
    """A data movement: the graph's own kernel applied to the codes."""

    encoding: LinearEncoding
    node: Node

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Reshape / transpose the int8 codes; no counters."""
        (y,) = run_node(self.node, [np.asarray(inputs[0].codes)])
        return LayerOutput(QTensor(np.ascontiguousarray(y), self.encoding), {})


def lower_layout(node: Node, ctx: Context) -> LayoutLayer:
    """Flatten / Reshape / Transpose: codes and scale unchanged."""
    enc = ctx.encoding(node.inputs[0])
    return LayoutLayer(
        name=node.name,
        op="layout_" + node.op_type.lower(),
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note="memory layout only",
        encoding=enc,
        node=node,
    )


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
            parts.append(y.astype(np.int8))
            results.extend(r)
        y = np.concatenate(parts, axis=self.axis)
        return LayerOutput(QTensor(y, self.encoding), sdp_counters(results))


def lower_concat(node: Node, ctx: Context) -> ConcatLayer:
    """Concat of computed tensors; constant inputs are not supported by the SDP path."""
    from quantemu.backends.nvdla.lower import unsupported  # noqa: PLC0415 (cycle)

    if any(ctx.initializer(i) is not None for i in node.inputs):
        raise unsupported(node, "a constant Concat input")
    enc = ctx.new_encoding(node.outputs[0])
    stages = []
    for name in node.inputs:
        s_in = ctx.encoding(name).scale
        same = np.float32(s_in) == np.float32(enc.scale)
        stages.append(None if same else activation_stage(None, {}, s_in, enc.scale))
    n = sum(s is not None for s in stages)
    note = f"{n} input(s) requantized by an SDP pass" if n else "all inputs share the scale"
    return ConcatLayer(
        name=node.name,
        op="concat",
        inputs=tuple(node.inputs),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        stages=tuple(stages),
        axis=int(node.attrs["axis"]),
    )


@dataclass(frozen=True, kw_only=True)
class FloatLayer(Layer):
    """A float32 CPU layer: dequantize, run the float kernel, requantize (``exact=False``)."""

    encoding: LinearEncoding
    node: Node
    constants: tuple[np.ndarray | None, ...]  # per node input: its initializer, else None

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Float32 kernel of the graph executor on the dequantized inputs."""
        it = iter(inputs)
        args = [c if c is not None else next(it).dequantize() for c in self.constants]
        (y,) = run_node(self.node, args)
        return LayerOutput(QTensor(self.encoding.target_quantize(y), self.encoding), {})


def float_fallback(node: Node, ctx: Context, reason: str) -> FloatLayer:
    """``node`` in float32 on the host, recorded with ``exact=False`` and ``reason``."""
    consts = tuple(ctx.initializer(i) for i in node.inputs)
    computed = tuple(i for i, c in zip(node.inputs, consts, strict=True) if c is None)
    enc = ctx.new_encoding(node.outputs[0])
    note = f"float32 fallback on the CPU: {reason}; output requantized (round half to even)"
    return FloatLayer(
        name=node.name,
        op="float:" + node.op_type,
        inputs=computed,
        output=node.outputs[0],
        exact=False,
        note=note,
        encoding=enc,
        node=node,
        constants=consts,
    )


def lower_cpu(node: Node, ctx: Context) -> FloatLayer:
    """Softmax: nvdla/sw runs it on the CPU."""
    return float_fallback(node, ctx, f"{node.op_type} is not an NVDLA operation (nvdla/sw runs "
                          "it on the CPU)")  # fmt: skip
