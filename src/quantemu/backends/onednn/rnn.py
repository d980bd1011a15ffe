"""oneDNN's int8 LSTM and GRU forward inference, bit for bit (oneDNN 3.2.0, README "RNN").

What the primitive computes, per layer, direction and time step (``ref_rnn.cpp``,
``cell_lstm.cpp``/``cell_gru.cpp`` and the JIT post-GEMM kernels of tag ``v3.2``):

1. **GEMMs** of the raw u8 states with the s8 weights, s32 accumulators: ``W_layer·x_t`` and
   ``W_iter·h_{t-1}`` added together. Without VNNI (``isa`` avx2, avx512_core) oneDNN's
   ``gemm_s8u8s32`` uses ``vpmaddubsw``: each GEMM's reduction runs in adjacent pairs whose
   sums saturate to s16; with VNNI the sums are exact.
2. **The shift compensation goes into the bias**, once, in f32:
   ``b' = b - ((Σ_i W_iter + Σ_i W_layer) * shift) / (wscale * scale)``.
3. **Dequantization**: ``g = f32(acc) / (wscale * scale) + b'`` (a true division).
4. **Gates** through oneDNN's JIT ``logistic``/``tanh`` (:mod:`.eltwise_jit`).
   LSTM (gates i, f, c~, o): ``c = fma(i, c~, f * c')``, ``h = tanh(c) * o``.
   GRU (gates u, r, c~): ``r·h'`` is re-quantized to u8 and multiplies ``W_iter[c~]`` in its own
   GEMM; ``h = fma(1 - u, c~, u * h')`` with ``h' = (u8 - shift) / scale``.
5. **Re-quantization** of every hidden state: ``u8 = cvtps2dq(min(max(h*scale + shift, 0),
   255))`` (a multiply, an add, round half to even).

Layer ``l > 0`` of direction ``d`` reads the u8 outputs of layer ``l - 1`` of the same
direction. ``dst_layer`` holds the last layer's states: the two directions side by side
(``concat``) or their u8 codes added with saturation (``sum``).
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from quantemu.backends.onednn.aten import fma_f32
from quantemu.backends.onednn.eltwise_jit import logistic_jit_f32, tanh_jit_f32
from quantemu.backends.onednn.pairsum import ArrayCache, exact_matmul, pair_sum_matmul
from quantemu.backends.onednn.params import Isa
from quantemu.backends.onednn.rnn_inputs import RnnInputs, check_inputs
from quantemu.backends.onednn.rnn_params import RnnCell, RnnDirection, RnnParams

__all__ = ["RnnResult", "gru", "lstm", "quantize_state", "rnn_forward"]

_F = np.float32
_CELLS = ArrayCache()


@dataclasses.dataclass(frozen=True)
class RnnResult:
    """What the primitive writes, and what saturated on the way.

    ``dst_layer`` (T, N, DLC) u8: every time step of the last layer. ``dst_iter`` (L, D, N, DHC)
    u8 and ``dst_iter_c`` (L, D, N, DHC) f32 (LSTM, else None): the last step of every layer.
    ``saturated_pairs``: pair sums the GEMMs clamped to s16 (0 with VNNI).
    ``saturated_states``: hidden-state values clamped to [0, 255] by the u8 re-quantization.
    """

    dst_layer: np.ndarray
    dst_iter: np.ndarray
    dst_iter_c: np.ndarray | None
    saturated_pairs: int
    saturated_states: int


@dataclasses.dataclass
class _Counters:
    pairs: int = 0
    states: int = 0


@dataclasses.dataclass(frozen=True)
class _Cell:
    """One (layer, direction): the GEMMs' weight operands (:func:`_operand`), f32 divisors and
    the compensated bias. ``w_iter`` is every gate's (LSTM), ``w_iter_ur``/``w_iter_c`` the
    GRU's u, r and c~ columns (two GEMMs)."""

    w_layer: np.ndarray
    w_iter: np.ndarray
    w_iter_ur: np.ndarray
    w_iter_c: np.ndarray
    divisor: np.ndarray  # f32(wscale * scale), (G*DHC,)
    bias: np.ndarray  # b', (G*DHC,)


def _operand(w: np.ndarray, isa: Isa) -> np.ndarray:
    """Weights ``(K, N)`` s8 as the GEMM engine takes them, once per primitive: read-only (so
    intmath caches its exactness plan), and for pair saturation int16 ``(1, K', N)`` with the
    reduction zero-padded to even length, as the packed GEMM pads it."""
    if isa.exact:
        out = np.array(w, dtype=np.int8, order="C")
    else:
        out = np.zeros((1, w.shape[0] + w.shape[0] % 2, w.shape[1]), dtype=np.int16)
        out[0, : w.shape[0]] = w
    out.setflags(write=False)
    return out


def _gemm(x: np.ndarray, w: np.ndarray, isa: Isa, counters: _Counters) -> np.ndarray:
    """s32 accumulators ``x (M, K) u8 · w`` (an :func:`_operand`) as int64 ``(M, N)``: exact,
    or pair-saturating."""
    if isa.exact:
        return exact_matmul(x, w, a_max=255, b_max=128)
    a = np.zeros((1, x.shape[0], w.shape[1]), dtype=np.int16)
    a[0, :, : x.shape[1]] = x
    result = pair_sum_matmul(a, w)
    counters.pairs += result.saturated_pairs
    return result.acc[0]


def quantize_state(h: np.ndarray, params: RnnParams) -> tuple[np.ndarray, int]:
    """oneDNN's u8 state quantization ``q_d`` of f32 ``h``, and how many values saturated.

    ``u8 = cvtps2dq(min(max(h*scale + shift, 0), 255))``: a binary32 multiply, then an add (no
    FMA), clamped in float, rounded half to even.

    >>> p = RnnParams("avx2")  # scale 127, shift 128
    >>> codes, saturated = quantize_state(np.array([-2, -1, 0, 0.5, 1, 2], np.float32), p)
    >>> codes.tolist(), saturated
    ([0, 1, 128, 192, 255, 255], 2)
    """
    v = np.asarray(h, dtype=_F) * _F(params.data_scale) + _F(params.data_shift)
    saturated = int(np.count_nonzero((v < 0) | (v > 255)))
    return np.rint(np.minimum(np.maximum(v, _F(0)), _F(255))).astype(np.uint8), saturated


def _quantize(h: np.ndarray, params: RnnParams, counters: _Counters) -> np.ndarray:
    codes, saturated = quantize_state(h, params)
    counters.states += saturated
    return codes


def _dequantize_state(u: np.ndarray, params: RnnParams) -> np.ndarray:
    """``deq_h``: ``(f32(u8) - shift) / scale``."""
    return (u.astype(_F) - _F(params.data_shift)) / _F(params.data_scale)


def _gates(acc: np.ndarray, cell: _Cell, cols: slice = slice(None)) -> np.ndarray:
    """``f32(acc) / divisor + b'`` for the gate columns ``cols``."""
    return acc.astype(_F) / cell.divisor[cols] + cell.bias[cols]


def _prepare(inputs: RnnInputs, layer: int, direction: int, params: RnnParams) -> _Cell:
    """The (layer, direction) cell, made once per weights: a lowered layer's weights are
    read-only, so every batch after the first reuses its GEMM operands and their plans."""
    others = (inputs.weights_layer, inputs.weights_scales, inputs.bias)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in others))
    key = ("rnn cell", layer, direction, params, digest.hexdigest())
    return _CELLS.get(
        inputs.weights_iter, key, lambda: _make_cell(inputs, layer, direction, params)
    )


def _make_cell(inputs: RnnInputs, layer: int, direction: int, params: RnnParams) -> _Cell:
    """The (layer, direction) cell, with oneDNN's bias compensation in f32 (``bias_finalize``)."""
    w_layer = inputs.weights_layer[layer, direction]
    w_iter = inputs.weights_iter[layer, direction]
    k_layer, g, dhc = w_layer.shape
    scales = np.broadcast_to(inputs.weights_scales, (g * dhc,)).astype(_F)
    divisor = scales * _F(params.data_scale)
    comp = w_iter.sum(axis=0, dtype=np.int64).astype(_F).reshape(-1) + w_layer.sum(
        axis=0, dtype=np.int64
    ).astype(_F).reshape(-1)
    bias = inputs.bias[layer, direction].reshape(-1) - comp * _F(params.data_shift) / divisor
    wi = w_iter.reshape(-1, g * dhc)
    return _Cell(
        _operand(w_layer.reshape(k_layer, g * dhc), params.isa),
        _operand(wi, params.isa),
        _operand(wi[:, : 2 * dhc], params.isa),
        _operand(wi[:, 2 * dhc :], params.isa),
        divisor,
        bias.astype(_F),
    )


def _lstm_step(acc, state, cell: _Cell, params: RnnParams, counters: _Counters):
    h, c = state
    acc = acc + _gemm(h, cell.w_iter, params.isa, counters)
    dhc = c.shape[1]
    g = _gates(acc, cell).reshape(-1, 4, dhc)
    i, f, o = (logistic_jit_f32(g[:, k]) for k in (0, 1, 3))
    c = fma_f32(i, tanh_jit_f32(g[:, 2]), c * f)
    return _quantize(tanh_jit_f32(c) * o, params, counters), c


def _gru_step(acc, state, cell: _Cell, params: RnnParams, counters: _Counters):
    h, c = state
    dhc = h.shape[1]
    two = slice(0, 2 * dhc)
    acc01 = acc[:, two] + _gemm(h, cell.w_iter_ur, params.isa, counters)
    u, r = np.split(logistic_jit_f32(_gates(acc01, cell, two)), 2, axis=1)
    h_prev = _dequantize_state(h, params)
    rh = _quantize(r * h_prev, params, counters)
    last = slice(2 * dhc, 3 * dhc)
    acc2 = acc[:, last] + _gemm(rh, cell.w_iter_c, params.isa, counters)
    c_tilde = tanh_jit_f32(_gates(acc2, cell, last))
    return _quantize(fma_f32(_F(1) - u, c_tilde, u * h_prev), params, counters), c


def _run_direction(inputs: RnnInputs, d: int, params: RnnParams, counters: _Counters):
    """Every layer of direction ``d``: the last layer's states (T, N, DHC) and the final states."""
    step = _lstm_step if inputs.cell is RnnCell.LSTM else _gru_step
    reverse = params.direction is RnnDirection.R2L or d == 1
    x = inputs.src_layer
    t_len, n = x.shape[:2]
    finals = []
    for layer in range(inputs.layers):
        cell = _prepare(inputs, layer, d, params)
        # The layer GEMM of every time step at once, as oneDNN's merged layer GEMM does.
        acc_layer = _gemm(x.reshape(t_len * n, -1), cell.w_layer, params.isa, counters)
        acc_layer = acc_layer.reshape(t_len, n, -1)
        h, c = inputs.src_iter[layer, d], inputs.src_iter_c[layer, d]
        states = np.empty((t_len, n, h.shape[1]), dtype=np.uint8)
        for t in range(t_len - 1, -1, -1) if reverse else range(t_len):
            h, c = step(acc_layer[t], (h, c), cell, params, counters)
            states[t] = h
        finals.append((h, c))
        x = states
    return x, finals


def rnn_forward(inputs: RnnInputs, params: RnnParams) -> RnnResult:
    """The primitive on checked inputs (:func:`lstm` and :func:`gru` check them first)."""
    counters = _Counters()
    outs, finals = [], []
    for d in range(params.direction.directions):
        states, per_layer = _run_direction(inputs, d, params, counters)
        outs.append(states)
        finals.append(per_layer)
    if params.direction is RnnDirection.CONCAT:
        dst_layer = np.concatenate(outs, axis=-1)
    elif params.direction is RnnDirection.SUM:
        dst_layer = np.minimum(outs[0].astype(np.int16) + outs[1], 255).astype(np.uint8)
    else:
        dst_layer = outs[0]
    dst_iter = np.stack([np.stack([f[layer][0] for f in finals]) for layer in range(inputs.layers)])
    dst_iter_c = None
    if inputs.cell is RnnCell.LSTM:
        dst_iter_c = np.stack(
            [np.stack([f[layer][1] for f in finals]) for layer in range(inputs.layers)]
        ).astype(_F)
    return RnnResult(dst_layer, dst_iter, dst_iter_c, counters.pairs, counters.states)


def lstm(
    src_layer: np.ndarray,
    weights_layer: np.ndarray,
    weights_iter: np.ndarray,
    weights_scales: np.ndarray,
    params: RnnParams,
    *,
    bias: np.ndarray | None = None,
    src_iter: np.ndarray | None = None,
    src_iter_c: np.ndarray | None = None,
) -> RnnResult:
    """oneDNN's int8 ``vanilla_lstm`` forward inference (module docstring).

    ``src_layer`` (T, N, SLC) u8; ``weights_layer`` (L, D, SLC, 4, DHC) and ``weights_iter``
    (L, D, DHC, 4, DHC) s8 in ``ldigo`` order (gates i, f, c~, o); ``weights_scales`` f32, one
    value (mask 0) or 4*DHC (mask 24); ``bias`` (L, D, 4, DHC) f32 (zeros when None);
    ``src_iter`` (L, D, N, DHC) u8 (when None: the quantized zero, ``sat(rne(shift))``);
    ``src_iter_c`` (L, D, N, DHC) f32 (zeros when None).
    """
    src = (src_layer, src_iter, src_iter_c)
    weights = (weights_layer, weights_iter, weights_scales)
    return rnn_forward(check_inputs(RnnCell.LSTM, params, src, weights, bias), params)


def gru(
    src_layer: np.ndarray,
    weights_layer: np.ndarray,
    weights_iter: np.ndarray,
    weights_scales: np.ndarray,
    params: RnnParams,
    *,
    bias: np.ndarray | None = None,
    src_iter: np.ndarray | None = None,
    linear_before_reset: bool = False,
) -> RnnResult:
    """oneDNN's int8 ``vanilla_gru`` forward inference (module docstring).

    As :func:`lstm` with 3 gates (u, r, c~) and no cell state. ``linear_before_reset=True``
    (``lbr_gru``) is refused: oneDNN 3.2.0 has no int8 implementation of it.
    """
    cell = RnnCell.LBR_GRU if linear_before_reset else RnnCell.GRU
    src = (src_layer, src_iter, None)
    weights = (weights_layer, weights_iter, weights_scales)
    return rnn_forward(check_inputs(cell, params, src, weights, bias), params)
