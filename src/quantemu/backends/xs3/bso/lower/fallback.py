"""Float fallbacks: operators without a lib_nn int8 form.

XMOS's runtime would run TFLite-Micro's int8 reference kernel for them. quantemu approximates it
in float (:class:`~quantemu.program.fallback.FloatFallbackLayer`: dequantize, quantemu.graph's
float kernel) and requantizes as TFLite's QUANTIZE (``round_half_away(x / scale) + zp``,
clamped, the clamps counted as ``output_saturated``), with ``exact=False`` and a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.quantize import TfliteInt8Encoding
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.fallback import FloatFallbackLayer, node_constants

# Operators TFLite-Micro has int8 reference kernels for (and lib_nn does not): XMOS's runtime
# would run those; quantemu approximates them in float with exact=False.
# LayerNormalization, Erf, Gelu, Pow, Sqrt, Reciprocal (transformer blocks) run in float too.
FALLBACK_OPS = (
    "Concat",
    "ConvTranspose",
    "Div",
    "Erf",
    "Gelu",
    "GlobalMaxPool",
    "HardSwish",
    "LayerNormalization",
    "LeakyRelu",
    "MatMul",
    "Mul",
    "Pow",
    "PRelu",
    "Reciprocal",
    "ReduceMean",
    "Resize",
    "Softmax",
    "Sqrt",
    "Upsample",
)
FALLBACK_NOTE = (
    "no lib_nn int8 operator: XMOS's runtime runs TFLite-Micro's int8 reference {op}; quantemu "
    "approximates it in float (dequantize, float {op}, requantize), not bit-exact"
)


@dataclass(frozen=True, eq=False, kw_only=True)
class Xs3FloatLayer(FloatFallbackLayer):
    """A float fallback requantized by TFLite's QUANTIZE (module docstring)."""

    encoding: TfliteInt8Encoding

    def requantize(self, values: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        """``output_saturated`` counts values outside the output encoding's range."""
        if not np.all(np.isfinite(values)):
            raise UnsupportedError(f"{self.node}: the float fallback produced inf/nan")
        codes, n_sat = self.encoding.quantize_count(values)
        return codes, {"output_saturated": n_sat}


def lower_float(ctx: Xs3Context, node: Node, why: str = "") -> Layer:
    """An explicit float fallback layer (``exact=False``) for ``node``; ``why`` joins the note."""
    enc_out = ctx.output_encoding(node)
    for name in ctx.data_inputs(node):
        ctx.encoding(name)  # every input needs its encoding (and a calibrated range)
    note = FALLBACK_NOTE.format(op=node.op_type) + (f" ({why})" if why else "")
    return ctx.layer(
        Xs3FloatLayer,
        node,
        op=f"float:{node.op_type}",
        exact=False,
        note=note,
        node=node,
        constants=node_constants(ctx.graph.initializers, node),
        encoding=enc_out,
    )
