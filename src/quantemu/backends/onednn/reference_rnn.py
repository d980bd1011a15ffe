"""Scalar Python references of oneDNN's int8 LSTM/GRU and its JIT exp, logistic and tanh.

Slow on purpose: one element at a time, Python ints for the GEMMs (pairs summed and saturated
one by one), ``numpy.float32`` scalars for every f32 step, and :func:`.reference.fma32` (exact
rational arithmetic) for each fused multiply-add. :mod:`.rnn` and :mod:`.eltwise_jit` are tested
against these with ``==`` on bit patterns.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

from quantemu.backends.onednn.eltwise_jit import (
    EXP_LN2,
    EXP_LN_FLT_MAX,
    EXP_LN_FLT_MIN,
    EXP_LOG2E,
    EXP_POLY,
    TANH_IDX_BIAS,
    TANH_IDX_MASK,
    TANH_LINEAR_UBOUND,
    TANH_POLY,
    TANH_SATURATION_LBOUND,
)
from quantemu.backends.onednn.reference import fma32, sat16
from quantemu.backends.onednn.rnn_params import RnnCell, RnnDirection, RnnParams

F = np.float32


@dataclasses.dataclass(frozen=True)
class Weights:
    """One (layer, direction): ``layer``/``iter`` as rows of G*DHC Python ints."""

    layer: list
    iter: list
    scales: np.ndarray
    bias: np.ndarray


def bits(v) -> int:
    """The binary32 encoding of ``v``."""
    return struct.unpack("<I", struct.pack("<f", F(v)))[0]


def from_bits(b: int) -> np.float32:
    """The binary32 value encoded by ``b``."""
    return F(struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0])


def exp_jit(x) -> np.float32:
    """One lane of ``exp_compute_vector_fwd``."""
    x = F(x)
    below = x < EXP_LN_FLT_MIN
    x = max(min(x, EXP_LN_FLT_MAX), EXP_LN_FLT_MIN)
    n = F(np.floor(F(F(x * EXP_LOG2E) + F(0.5))))
    r = fma32(-n, EXP_LN2, x)
    pow2 = F(0) if below else from_bits((int(n - F(1)) + 127) << 23)
    p = EXP_POLY[4]
    for c in (EXP_POLY[3], EXP_POLY[2], EXP_POLY[1], EXP_POLY[0], F(1)):
        p = fma32(p, r, c)
    with np.errstate(over="ignore"):
        return F(F(p * pow2) * F(2))


def logistic_jit(x) -> np.float32:
    """One lane of ``logistic_compute_vector_fwd``."""
    e = exp_jit(from_bits(bits(x) | 0x80000000))
    y = F(e / F(e + F(1)))
    return y if bits(x) >> 31 else F(F(1) - y)


def tanh_jit(x) -> np.float32:
    """One lane of ``tanh_compute_vector_fwd``."""
    b = bits(x)
    magnitude = b & 0x7FFFFFFF
    a = from_bits(magnitude)
    if not a < TANH_SATURATION_LBOUND:
        y = F(1)
    elif a < TANH_LINEAR_UBOUND:
        y = a
    else:
        idx = ((magnitude - TANH_IDX_BIAS) & TANH_IDX_MASK) >> 22
        reduced = F(a - from_bits(magnitude & TANH_IDX_MASK))
        y = TANH_POLY[6][idx]
        for degree in range(5, -1, -1):
            y = fma32(y, reduced, TANH_POLY[degree][idx])
    return from_bits(bits(y) ^ (b & 0x80000000))


def dot(x, w, column: int, exact: bool) -> int:
    """``Σ_k x[k]·w[k][column]``: exact, or by adjacent pairs saturated to s16."""
    products = [int(x[k]) * int(w[k][column]) for k in range(len(x))]
    if exact:
        return sum(products)
    products += [0] * (len(products) % 2)
    return sum(sat16(products[j] + products[j + 1]) for j in range(0, len(products), 2))


def quantize(h, scale: float, shift: float) -> int:
    """``q_d``: ``rne(min(max(h*scale + shift, 0), 255))``."""
    v = F(F(F(h) * F(scale)) + F(shift))
    return int(np.rint(min(max(v, F(0)), F(255))))


def _gates(x, h, w: Weights, p: RnnParams, columns: int):
    """``(acc, ws*scale, b')`` of the first ``columns`` gate columns (LSTM: all; GRU: u, r)."""
    out = []
    for col in range(columns):
        div, b = _divisor_bias(w, p, col)
        acc = dot(x, w.layer, col, p.isa.exact) + dot(h, w.iter, col, p.isa.exact)
        out.append((acc, div, b))
    return out


def _divisor_bias(w: Weights, p: RnnParams, col: int):
    """``ws*scale`` and the compensated bias ``b'`` of gate column ``col``."""
    ws = F(w.scales[col if w.scales.size > 1 else 0])
    div = F(ws * F(p.data_scale))
    comp = F(F(sum(int(r[col]) for r in w.iter)) + F(sum(int(r[col]) for r in w.layer)))
    return div, F(F(w.bias[col]) - F(F(comp * F(p.data_shift)) / div))


def lstm_cell(x, state, w: Weights, p: RnnParams):
    """One LSTM step of one batch row: ``state`` = (u8 h, f32 c) lists, returned updated."""
    h, c = state
    dhc = len(c)
    pre = [F(F(F(acc) / div) + b) for acc, div, b in _gates(x, h, w, p, 4 * dhc)]
    h_new, c_new = [], []
    for j in range(dhc):
        i, f, o = (logistic_jit(pre[k * dhc + j]) for k in (0, 1, 3))
        cj = fma32(i, tanh_jit(pre[2 * dhc + j]), F(F(c[j]) * f))
        c_new.append(cj)
        h_new.append(quantize(F(tanh_jit(cj) * o), p.data_scale, p.data_shift))
    return h_new, c_new


def gru_cell(x, h, w: Weights, p: RnnParams):
    """One GRU step of one batch row (u8 h list)."""
    dhc = len(h)
    gates = _gates(x, h, w, p, 2 * dhc)
    pre = [F(F(F(acc) / div) + b) for acc, div, b in gates]
    h_prev = [F(F(F(v) - F(p.data_shift)) / F(p.data_scale)) for v in h]
    u = [logistic_jit(v) for v in pre[:dhc]]
    rh = [quantize(F(logistic_jit(pre[dhc + j]) * h_prev[j]), p.data_scale, p.data_shift)
          for j in range(dhc)]  # fmt: skip
    out = []
    for j in range(dhc):
        col = 2 * dhc + j
        div, b = _divisor_bias(w, p, col)
        acc = dot(x, w.layer, col, p.isa.exact) + dot(rh, w.iter, col, p.isa.exact)
        ct = tanh_jit(F(F(F(acc) / div) + b))
        out.append(quantize(fma32(F(F(1) - u[j]), ct, F(u[j] * h_prev[j])), p.data_scale,
                            p.data_shift))  # fmt: skip
    return out


def rnn(cell: RnnCell, p: RnnParams, x, states, tensors):
    """The whole primitive (shapes of :mod:`.rnn`): ``states`` = (src_iter, src_iter_c),
    ``tensors`` = (weights_layer, weights_iter, weights_scales, bias) as arrays; returns
    (dst_layer, dst_iter, dst_iter_c) as nested lists."""
    h0, c0 = states
    wl, wi, scales, bias = tensors
    dirs = p.direction.directions
    t_len, n = len(x), len(x[0])
    outs, dst_iter, dst_c = [], [[None] * dirs for _ in wl], [[None] * dirs for _ in wl]
    for d in range(dirs):
        seq = x
        for layer in range(len(wl)):
            w = Weights(
                [[int(v) for v in row.reshape(-1)] for row in wl[layer][d]],
                [[int(v) for v in row.reshape(-1)] for row in wi[layer][d]],
                scales,
                bias[layer][d].reshape(-1),
            )
            h, c = [list(r) for r in h0[layer][d]], [list(r) for r in c0[layer][d]]
            states = [None] * t_len
            order = (
                range(t_len - 1, -1, -1) if (p.direction is RnnDirection.R2L or d) else range(t_len)
            )
            for t in order:
                for row in range(n):
                    if cell is RnnCell.LSTM:
                        h[row], c[row] = lstm_cell(seq[t][row], (h[row], c[row]), w, p)
                    else:
                        h[row] = gru_cell(seq[t][row], h[row], w, p)
                states[t] = [list(r) for r in h]
            dst_iter[layer][d], dst_c[layer][d] = h, c
            seq = states
        outs.append(seq)
    if p.direction is RnnDirection.CONCAT:
        dst = [[outs[0][t][r] + outs[1][t][r] for r in range(n)] for t in range(t_len)]
    elif p.direction is RnnDirection.SUM:
        pairs = ((t, r) for t in range(t_len) for r in range(n))
        flat = [[min(a + b, 255) for a, b in zip(outs[0][t][r], outs[1][t][r], strict=True)]
                for t, r in pairs]  # fmt: skip
        dst = [flat[t * n : (t + 1) * n] for t in range(t_len)]
    else:
        dst = outs[0]
    return dst, dst_iter, dst_c
