"""Gemm / MatMul with constant weights -> PyTorch's ``quantized::linear`` (``_relu``): oneDNN's
int8 matmul, then the f32 requantization with the weight scale round trip (page §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from quantemu.backends.onednn.family import predict_quantized_linear_impl
from quantemu.backends.onednn.lower.context import Context
from quantemu.backends.onednn.lower.quantized import (
    QuantizedLayer,
    frozen,
    quantized_layer,
    quantized_weights,
    requantization,
)
from quantemu.backends.onednn.matmul import matmul
from quantemu.backends.onednn.params import MatmulApi, MatmulParams, QuantizedLinearParams, SrcType
from quantemu.backends.onednn.requant import requantize_f32
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class QLinearLayer(QuantizedLayer):
    """PyTorch ``quantized::linear`` (``_relu``) on oneDNN: ``matmul`` then ``requantize``.

    ``weight``: int8 (N, K), as quantized_linear takes it; ``weight_t`` its contiguous (K, N)
    transpose, the matmul's B.
    """

    torch_op: ClassVar[str] = "linear"
    weight_t: np.ndarray
    params: QuantizedLinearParams

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        quant = self.params.quant
        mp = MatmulParams(self.params.isa, SrcType.U8, MatmulApi.MATMUL, quant.x_zero_point)
        res = matmul(inputs[0].codes, self.weight_t, mp)
        v = requantize_f32(res.acc, 1, quant, self.params.impl, w_round_trip=True, bias=self.bias)
        return self.result(res.acc, res.saturated_pairs, v)


def _gemm_weights(ctx: Context, node: Node, w: np.ndarray):
    """Gemm's ``(weights (N, K), bias | None)`` with ``alpha`` and ``beta`` folded in."""
    a = node.attrs
    if a["transA"]:
        raise NotLowerable("transA = 1 (the activation must be (N, K))")
    if a["alpha"] != 1.0:
        if node.inputs[1] in ctx.graph.quant_overrides:
            raise NotLowerable(f"alpha = {a['alpha']} on a weight quantized in the file")
        w = w * np.float32(a["alpha"])
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        c = ctx.constant(node, 2, "bias")
        if c.size not in (1, w.shape[0]):
            raise NotLowerable(f"bias of shape {c.shape} is not per output feature")
        bias = np.broadcast_to(c.reshape(-1) * np.float32(a["beta"]), (w.shape[0],))
    return w, bias


def lower_linear(ctx: Context, node: Node) -> QLinearLayer:
    """Gemm / MatMul with constant weights -> ``quantized::linear``."""
    x = ctx.activation(node)
    if len(ctx.shape(x)) != 2:
        raise NotLowerable(f"input {x} is not 2-D (quantized::linear here takes (N, K))")
    b = ctx.constant(node, 1, "weight")
    if b.ndim != 2:
        raise NotLowerable(f"weight of shape {b.shape} is not 2-D")
    stored_kn = node.op_type == "MatMul" or not node.attrs["transB"]
    w = b.T if stored_kn else b  # (N, K), as torch.nn.Linear holds it
    bias = None
    if node.op_type == "Gemm":
        w, bias = _gemm_weights(ctx, node, w)
    codes, scales = quantized_weights(ctx, node, w, stored_kn=stored_kn)
    opts = ctx.options
    impl = opts.pick("linear_impl", node.name) or predict_quantized_linear_impl(opts.isa)
    quant = requantization(ctx, x, node.outputs[0], scales)
    return quantized_layer(
        ctx,
        node,
        QLinearLayer,
        x,
        impl.value,
        weight=codes,
        weight_t=frozen(codes.T),
        bias=bias,
        params=QuantizedLinearParams(opts.isa, impl, quant),
    )
