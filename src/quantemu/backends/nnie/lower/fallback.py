"""Float fallbacks: the layer types MQBench's NNIE flow exports no clip for.

PRelu, Sigmoid, Softmax, Clip, GlobalAveragePool and Mul (MQBench's ``nnie_exclude_layer_type``
that need arithmetic), and grouped Conv/ConvTranspose with ``grouped_conv="float"``, run as
float32 on the dequantized inputs with float32 parameters; the output is log-quantized with its
tensor's clip, which is where the next NNIE layer would quantize it (``float:<Op>``,
``exact=False``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.encoding import LogEncoding, quantize_counted
from quantemu.graph.ir import Node
from quantemu.program.fallback import FloatFallbackLayer

FLOAT_NOTE = (
    "float fallback: {why}; float32 on the dequantized inputs{weights}, output log-quantized "
    "with its tensor's clip"
)


def excluded(what: str) -> str:
    """Why ``what`` falls back: the reason a rule or the rule table gives the fallback."""
    return f"MQBench's NNIE flow exports no clip for {what}"


@dataclass(frozen=True, kw_only=True)
class NnieFallbackLayer(FloatFallbackLayer):
    """A float fallback whose output is log-quantized exactly, counting ``clipped`` and
    ``underflow_to_zero`` as the NNIE layers do."""

    encoding: LogEncoding

    def requantize(self, values: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        codes, clipped, underflow = quantize_counted(values, self.encoding)
        return codes, {"clipped": clipped, "underflow_to_zero": underflow}


def float_fallback(ctx: NnieContext, node: Node, why: str) -> NnieFallbackLayer:
    """``float:<Op>``: ``node`` in float32 with float32 constants (see the module docstring)."""
    constants = {
        position: ctx.float_constant(name)
        for position, name in enumerate(node.inputs)
        if name and name in ctx.graph.initializers
    }
    weights = " with float32 parameters" if constants else ""
    return ctx.layer(
        NnieFallbackLayer,
        node,
        op=f"float:{node.op_type}",
        exact=False,
        note=FLOAT_NOTE.format(why=why, weights=weights),
        node=node,
        encoding=ctx.activation(node.outputs[0]),
        constants=constants,
    )
