"""The float fallback: a node without an integer lowering runs in float32 and its result is
quantized with ``torch.quantize_per_tensor``'s rule (:class:`..aten.TorchU8Encoding`), counting
what saturates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.lower.context import Context
from quantemu.graph.ir import Node
from quantemu.program.fallback import FloatFallbackLayer, node_constants


@dataclass(frozen=True, eq=False, kw_only=True)
class U8FloatFallbackLayer(FloatFallbackLayer):
    """The framework's float fallback, requantized by ``quantize_per_tensor``; counts
    ``output_saturated`` (values whose ideal code ``x / s + zp`` rounds outside ``[0, 255]``)."""

    def requantize(self, values: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        codes = self.encoding.target_quantize(values)
        bounds = np.asarray(values, np.float64) / self.encoding.scale + self.encoding.zp
        saturated = int(np.count_nonzero((bounds < -0.5) | (bounds > 255.5)))
        return codes, {"output_saturated": saturated}


def lower_fallback(ctx: Context, node: Node, why: str) -> U8FloatFallbackLayer:
    """``node`` as a float fallback layer (``exact=False``); the note says why."""
    return ctx.layer(
        U8FloatFallbackLayer,
        node,
        op=f"float:{node.op_type}",
        exact=False,
        note=f"float fallback ({why}): inputs dequantized, float32 {node.op_type} kernel, output "
        "requantized with torch.quantize_per_tensor's rule; not PyTorch's quantized kernel",
        node=node,
        constants=node_constants(ctx.graph.initializers, node),
    )
