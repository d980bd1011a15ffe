"""The float (CPU) fallback of the NVDLA lowering.

Softmax is not an NVDLA operation: nvdla/sw runs it on the CPU (``CPUNode``). quantemu does the
same in float32: dequantize, the float executor's kernel, requantize to the output's int8
encoding (round half to even, the host's rounding; no hardware counter sees it). A global pool
whose plane the PDP cannot factor falls back the same way. Such layers have ``exact=False``.
"""

from __future__ import annotations

from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.graph.ir import Node
from quantemu.program.fallback import FloatFallbackLayer, node_constants

#: Ops nvdla/sw always runs on the CPU, with the reason the layer's note gives.
CPU_OPS = {"Softmax": "Softmax is not an NVDLA operation (nvdla/sw runs it on the CPU)"}


def float_fallback(ctx: NvdlaContext, node: Node, why: str) -> FloatFallbackLayer:
    """``node`` in float32 on the host, recorded with ``exact=False`` and ``why``."""
    note = f"float32 fallback on the CPU: {why}; output requantized (round half to even)"
    return ctx.layer(FloatFallbackLayer, node, op="float:" + node.op_type, exact=False,
                     note=note, node=node, encoding=ctx.new_encoding(node.outputs[0]),
                     constants=node_constants(ctx.graph.initializers, node))  # fmt: skip
