"""LSTM and GRU (ONNX, layout 0): shapes and float32 kernels.

Normalized attributes (see :mod:`quantemu.graph.onnx_attrs.recurrent`): ``hidden_size`` (int),
``direction`` (``"forward"``, ``"reverse"`` or ``"bidirectional"``), GRU ``linear_before_reset``
(0 or 1). Inputs keep ONNX's positions, ``""`` marking an omitted one: ``X, W, R[, B][,
sequence_lens][, initial_h][, initial_c]`` (``initial_c`` for LSTM only); ``sequence_lens`` is
always ``""`` (the importer drops one that equals the sequence length everywhere) and the peephole
input ``P`` never appears (all zero or refused). Outputs ``Y`` (seq_length, num_directions, batch,
hidden_size), ``Y_h`` and, for LSTM, ``Y_c`` (num_directions, batch, hidden_size).

The kernels follow the ONNX operator definitions with the default activations (sigmoid, tanh,
tanh): gate order i, o, f, c (LSTM) and z, r, h (GRU) in W, R and B. Every direction's input
projection ``X W^T`` is one float32 matmul over all time steps; then one loop over the time
steps, each step one batched matmul ``H R^T`` for all directions at once (a reverse direction
reads X from its end).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register, same_dim

#: Gates per op: the row blocks of W and R (and of each half of B).
GATES = {"LSTM": 4, "GRU": 3}
#: Input positions (ONNX's).
B_INPUT, SEQUENCE_LENS, INITIAL_H, INITIAL_C = 3, 4, 5, 6
DIRECTIONS = ("forward", "reverse", "bidirectional")


def num_directions(direction: str) -> int:
    """2 for ``"bidirectional"``, 1 otherwise."""
    return 2 if direction == "bidirectional" else 1


def _optional(items: Sequence, index: int):
    return items[index] if index < len(items) else None


# -- shapes -----------------------------------------------------------------------------------


def _expect(node: Node, info: TensorInfo, role: str, expected: Shape, meaning: str) -> Shape:
    """``info``'s shape against ``expected`` (unknown dims on either side match anything)."""
    ok = info.rank == len(expected) and all(
        not known(a) or not known(b) or a == b for a, b in zip(info.shape, expected, strict=True)
    )
    if not ok:
        attrs = node.attrs
        raise fail(
            node,
            f"{role} {info.name!r} has shape {info.shape}, expected {expected} ({meaning}; "
            f"hidden_size={attrs['hidden_size']}, direction={attrs['direction']!r})",
        )
    return tuple(same_dim(node, a, b, role) for a, b in zip(info.shape, expected, strict=True))


def _infer(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    gates, hidden = GATES[node.op_type], node.attrs["hidden_size"]
    dirs = num_directions(node.attrs["direction"])
    x = data(node, infos, 0)
    if x.rank != 3:
        raise fail(
            node, f"X {x.name!r} has shape {x.shape}, expected rank 3 (seq_length, batch, input)"
        )
    seq, batch, size = x.shape
    g = "4*hidden_size" if gates == 4 else "3*hidden_size"
    _expect(node, data(node, infos, 1), "W", (dirs, gates * hidden, size),
            f"num_directions, {g}, input_size")  # fmt: skip
    _expect(node, data(node, infos, 2), "R", (dirs, gates * hidden, hidden),
            f"num_directions, {g}, hidden_size")  # fmt: skip
    bias = _optional(infos, B_INPUT)
    if bias is not None:
        _expect(node, bias, "B", (dirs, 2 * gates * hidden), f"num_directions, 2*{g}")
    if _optional(infos, SEQUENCE_LENS) is not None:
        raise fail(node, "sequence_lens must be omitted (the importer folds a full-length one)")
    for index, role in ((INITIAL_H, "initial_h"), (INITIAL_C, "initial_c")):
        state = _optional(infos, index)
        if state is not None:
            meaning = "num_directions, batch_size, hidden_size"
            batch = _expect(node, state, role, (dirs, batch, hidden), meaning)[1]
    state_shape: Shape = (dirs, batch, hidden)
    outputs = [(seq, dirs, batch, hidden), state_shape]
    return [*outputs, state_shape] if node.op_type == "LSTM" else outputs


def _macs(node: Node, infos: Sequence[TensorInfo | None], outs: Sequence[TensorInfo]) -> int:
    """Multiply-accumulates per batch entry: every step, every direction, ``X W^T + H R^T``."""
    x = infos[0]
    if x is None or x.rank != 3 or not (known(x.shape[0]) and known(x.shape[2])):
        return 0
    seq, size = int(x.shape[0]), int(x.shape[2])
    hidden = node.attrs["hidden_size"]
    dirs = num_directions(node.attrs["direction"])
    return seq * dirs * GATES[node.op_type] * hidden * (size + hidden)


# -- kernels ------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # The Sigmoid op's float32 formula; exp overflows to inf for very negative x, giving 0.
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def _schedule(direction: str, seq: int) -> np.ndarray:
    """(num_directions, seq) time index that each direction reads at each step."""
    forward = np.arange(seq)
    rows = {"forward": [forward], "reverse": [forward[::-1]]}
    return np.stack(rows.get(direction, [forward, forward[::-1]]))


def _project(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``X W^T + bias`` for every direction and time step: (dirs, seq, batch, gates*hidden)."""
    seq, batch, size = x.shape
    xw = np.matmul(x.reshape(1, seq * batch, size), np.swapaxes(w, 1, 2))
    xw += bias[:, None, :]
    return xw.reshape(w.shape[0], seq, batch, w.shape[1])


def _prepare(attrs: Attrs, inputs: Sequence[np.ndarray | None], gates: int):
    """Shared set-up: biases (zeros when absent), initial state (zeros when absent), R^T."""
    x, w, r = (np.asarray(a, dtype=np.float32) for a in inputs[:3])
    dirs, hidden = w.shape[0], attrs["hidden_size"]
    bias = _optional(inputs, B_INPUT)
    if bias is None:
        bias = np.zeros((dirs, 2 * gates * hidden), np.float32)
    wb, rb = bias[:, : gates * hidden], bias[:, gates * hidden :]
    h = _optional(inputs, INITIAL_H)
    state = np.zeros((dirs, x.shape[1], hidden), np.float32)
    h = state if h is None else np.array(h, dtype=np.float32)
    return x, w, np.swapaxes(r, 1, 2), wb, rb, h


def _run_lstm(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, w, rt, wb, rb, h = _prepare(attrs, inputs, 4)
    c0 = _optional(inputs, INITIAL_C)
    c = np.zeros_like(h) if c0 is None else np.array(c0, dtype=np.float32)
    n = attrs["hidden_size"]
    xw = _project(x, w, wb + rb)  # ONNX's Wb + Rb, added once per step with X W^T
    order = _schedule(attrs["direction"], x.shape[0])
    dirs = np.arange(w.shape[0])
    y = np.empty((x.shape[0], w.shape[0], x.shape[1], n), np.float32)
    for step in range(x.shape[0]):
        times = order[:, step]
        gates = xw[dirs, times] + np.matmul(h, rt)
        iof = _sigmoid(gates[..., : 3 * n])  # i, o, f
        c = iof[..., 2 * n :] * c + iof[..., :n] * np.tanh(gates[..., 3 * n :])
        h = iof[..., n : 2 * n] * np.tanh(c)
        y[times, dirs] = h
    return [y, h, c]


def _run_gru(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, w, rt, wb, rb, h = _prepare(attrs, inputs, 3)
    n = attrs["hidden_size"]
    # z and r take Wb + Rb with X W^T; h's Rbh goes inside (or, with linear_before_reset, with
    # H Rh^T before) the reset gate's product, so only Wbh joins the projection.
    xw = _project(x, w, np.concatenate([wb[:, : 2 * n] + rb[:, : 2 * n], wb[:, 2 * n :]], axis=1))
    rt_zr, rt_h = np.ascontiguousarray(rt[..., : 2 * n]), np.ascontiguousarray(rt[..., 2 * n :])
    rb_h = rb[:, None, 2 * n :]
    before_reset = bool(attrs["linear_before_reset"])
    order = _schedule(attrs["direction"], x.shape[0])
    dirs = np.arange(w.shape[0])
    y = np.empty((x.shape[0], w.shape[0], x.shape[1], n), np.float32)
    for step in range(x.shape[0]):
        times = order[:, step]
        xw_t = xw[dirs, times]
        zr = _sigmoid(xw_t[..., : 2 * n] + np.matmul(h, rt_zr))
        z, r = zr[..., :n], zr[..., n:]
        if before_reset:
            candidate = xw_t[..., 2 * n :] + r * (np.matmul(h, rt_h) + rb_h)
        else:
            candidate = xw_t[..., 2 * n :] + (np.matmul(r * h, rt_h) + rb_h)
        h = (np.float32(1) - z) * np.tanh(candidate) + z * h
        y[times, dirs] = h
    return [y, h]


register("LSTM", _infer, _run_lstm, inputs=(3, 7), macs=_macs)
register("GRU", _infer, _run_gru, inputs=(3, 6), macs=_macs)
