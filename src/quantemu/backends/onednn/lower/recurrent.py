"""ONNX LSTM / GRU -> oneDNN's int8 RNN primitive (:mod:`..rnn`), one layer per node.

- Weights: ONNX ``W`` (D, G*H, I), ``R`` (D, G*H, H) in ONNX's gate order (LSTM i, o, f, c;
  GRU z, r, h) become oneDNN's ``ldigo`` in its order (LSTM i, f, c~, o; GRU u, r, c~), quantized
  by the weights reorder: ``s8 = sat(rne(w * scale))`` with ``scale = 63 / W_max`` (option
  ``rnn_weights``: the seed's one scale over ``W`` and ``R`` of every direction, mask 0, or one
  per gate and output channel, mask 24: ``rnn_weights_qparams`` serves both directions).
  ``B`` = ``[Wb, Rb]`` becomes ``Wb + Rb`` in f32.
- States: the data qparams of :mod:`.rnn_qparams`. An input quantized with other qparams is
  converted by the glue a deployment writes: PyTorch's dequantization, then oneDNN's u8
  quantization (``q_d``); stacked layers share the states' qparams, so their codes pass as they
  are. Constant initial states are quantized the way the primitive quantizes f32 ``src_iter``.
- Output ``Y`` (T, D, N, H): the primitive's ``dst_layer`` codes, directions side by side
  (``bidirectional_concat``). A node whose ``Y_h``/``Y_c`` is read is refused by the framework
  (one output per layer).
- Not lowered (float fallback or an error): GRU ``linear_before_reset = 1`` (oneDNN 3.2.0 has no
  int8 LBR-GRU), run-time initial states, initial states that differ across the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.backends.onednn.lower.options import RnnWeights, rnn_implementation
from quantemu.backends.onednn.lower.rnn_qparams import rnn_data_qparams
from quantemu.backends.onednn.quantize import quantize_rnn_weights
from quantemu.backends.onednn.rnn import gru, lstm, quantize_state
from quantemu.backends.onednn.rnn_params import RnnCell, RnnDirection, RnnParams
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable

# oneDNN gate g takes ONNX gate ONNX_GATES[cell][g].
ONNX_GATES = {RnnCell.LSTM: (0, 2, 3, 1), RnnCell.GRU: (0, 1, 2)}
_F = np.float32


@dataclass(frozen=True, eq=False, kw_only=True)
class RnnLayer(U8Layer):
    """oneDNN's int8 LSTM/GRU on one ONNX node; ``step_axis`` 0 of ``Y`` is time."""

    cell: RnnCell
    params: RnnParams
    weights_layer: np.ndarray  # (1, D, I, G, H) s8
    weights_iter: np.ndarray  # (1, D, H, G, H) s8
    weights_scales: np.ndarray  # (1,) or (G*H,) f32
    bias: np.ndarray  # (1, D, G, H) f32
    h0: np.ndarray | None  # (1, D, 1, H) f32, broadcast over the batch
    c0: np.ndarray | None
    x_encoding: TorchU8Encoding
    step_axis: int = 0

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        x, saturated_in = self._input_codes(inputs[0])
        n = x.shape[1]
        states = {}
        for key, value in (("src_iter", self.h0), ("src_iter_c", self.c0)):
            if value is not None:
                full = np.broadcast_to(value, (*value.shape[:2], n, value.shape[3]))
                states[key] = (
                    quantize_state(full, self.params)[0] if key == "src_iter" else full.copy()
                )
        args = (x, self.weights_layer, self.weights_iter, self.weights_scales, self.params)
        if self.cell is RnnCell.LSTM:
            res = lstm(*args, bias=self.bias, **states)
        else:
            res = gru(*args, bias=self.bias, src_iter=states.get("src_iter"))
        t, _, _ = res.dst_layer.shape
        d = self.params.direction.directions
        y = res.dst_layer.reshape(t, n, d, -1).transpose(0, 2, 1, 3)
        counters = {
            "pair_saturated": res.saturated_pairs,
            "state_saturated": res.saturated_states,
            "input_saturated": saturated_in,
        }
        return LayerOutput(QTensor(np.ascontiguousarray(y), self.encoding), counters)

    def _input_codes(self, q: QTensor) -> tuple[np.ndarray, int]:
        """The input's u8 codes under the states' qparams (module docstring)."""
        if self.x_encoding.same_params(self.encoding):
            return np.asarray(q.codes, dtype=np.uint8), 0
        return quantize_state(self.x_encoding.dequantize(q.codes), self.params)


def _cell(node: Node) -> RnnCell:
    if node.op_type == "LSTM":
        return RnnCell.LSTM
    if node.attrs["linear_before_reset"]:
        raise NotLowerable(
            "linear_before_reset = 1 (PyTorch's nn.GRU): oneDNN 3.2.0 has no int8 "
            "linear-before-reset GRU (dnnl_unimplemented)"
        )
    return RnnCell.GRU


def _scales(wl: np.ndarray, wi: np.ndarray, per_channel: bool) -> np.ndarray:
    """``63 / W_max`` over (D, K, G, H) weights: per (gate, channel), or one (module docstring).
    An all-zero channel has no ``63 / W_max``; any positive scale gives its zero codes."""
    axes = (0, 1) if per_channel else None
    w_max = np.maximum(np.abs(wl).max(axis=axes), np.abs(wi).max(axis=axes))
    w_max = np.asarray(w_max, dtype=_F).reshape(-1)
    return np.where(w_max > 0, _F(63) / np.where(w_max > 0, w_max, _F(1)), _F(1)).astype(_F)


def _onednn_weights(ctx: Context, node: Node, cell: RnnCell):
    """``(weights_layer, weights_iter, scales, bias)`` in oneDNN's layouts (module docstring)."""
    w, r = ctx.constant(node, 1, "W"), ctx.constant(node, 2, "R")
    d, gh, i = w.shape
    g, h = cell.gates, gh // cell.gates
    order = list(ONNX_GATES[cell])
    # (D, G*H, K) in ONNX order -> (D, K, G, H) in oneDNN order
    wl = w.reshape(d, g, h, i)[:, order].transpose(0, 3, 1, 2)
    wi = r.reshape(d, g, h, h)[:, order].transpose(0, 3, 1, 2)
    per_channel = ctx.options.rnn_weights is RnnWeights.PER_CHANNEL
    scales = _scales(wl, wi, per_channel)
    per_gate = scales.reshape(g, h) if per_channel else scales
    codes_l = quantize_rnn_weights(np.ascontiguousarray(wl), per_gate)
    codes_i = quantize_rnn_weights(np.ascontiguousarray(wi), per_gate)
    bias = np.zeros((d, g, h), _F)
    if len(node.inputs) > 3 and node.inputs[3]:
        b = ctx.constant(node, 3, "B").reshape(d, 2, g, h)
        bias = (b[:, 0] + b[:, 1])[:, order]
    return codes_l[None], codes_i[None], scales, np.ascontiguousarray(bias[None])


def _initial_state(ctx: Context, node: Node, index: int, role: str) -> np.ndarray | None:
    """A constant initial state (D, N, H) as (1, D, 1, H); None when absent."""
    if len(node.inputs) <= index or not node.inputs[index]:
        return None
    if node.inputs[index] not in ctx.graph.initializers:
        raise NotLowerable(f"the {role} is computed at run time (oneDNN takes it as an input)")
    value = ctx.constant(node, index, role)
    if not np.all(value == value[:, :1]):
        raise NotLowerable(f"the {role} differs across the batch")
    return np.ascontiguousarray(value[None, :, :1])


def lower_recurrent(ctx: Context, node: Node) -> RnnLayer:
    """ONNX LSTM / GRU -> :class:`RnnLayer`."""
    cell = _cell(node)
    x = ctx.activation(node)
    direction = {
        "forward": RnnDirection.L2R,
        "reverse": RnnDirection.R2L,
        "bidirectional": RnnDirection.CONCAT,
    }[node.attrs["direction"]]
    wl, wi, scales, bias = _onednn_weights(ctx, node, cell)
    scale, shift = rnn_data_qparams(node, ctx.ranges, ctx.options)
    mask = 24 if ctx.options.rnn_weights is RnnWeights.PER_CHANNEL else 0
    params = RnnParams(ctx.options.isa, direction, scale, shift, mask)
    h0 = _initial_state(ctx, node, 5, "initial_h")
    c0 = _initial_state(ctx, node, 6, "initial_c") if cell is RnnCell.LSTM else None
    impl = rnn_implementation(ctx.options.isa, short=True)
    return ctx.layer(
        RnnLayer,
        node,
        op=f"rnn {cell.value} [{direction.value}, {impl}]",
        inputs=(x,),
        cell=cell,
        params=params,
        weights_layer=wl,
        weights_iter=wi,
        weights_scales=scales,
        bias=bias,
        h0=h0,
        c0=c0,
        x_encoding=ctx.encodings[x],
    )
