"""The u8 data qparams of an LSTM/GRU node (``rnn_data_qparams``), and the encoding they give
its output.

oneDNN's RNN primitive quantizes every state of a layer (input, hidden, output) with one
``u8 = rne(h * scale + shift)``. ``seed``: ``scale = 127, shift = 128`` (oneDNN's
recommendation, states in [-1, 1]); ``calibrated``: ``scale = 255 / (hi - lo)`` and the shift
rounded to an integer, from the envelope of the calibrated ranges of the node's input and output
(``lo <= 0 <= hi``). The output's codes are the primitive's own, so its encoding is PyTorch's
``quint8`` with ``(1 / scale, shift)``: what a user wraps the u8 result in
(``torch._make_per_tensor_quantized_tensor``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.lower.options import Options, RnnData
from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node

RECURRENT_OPS = frozenset({"LSTM", "GRU"})
SEED_DATA = (127.0, 128.0)


def rnn_data_qparams(node: Node, ranges: Mapping[str, Any], opts: Options) -> tuple[float, float]:
    """``(scale, shift)`` of ``node``'s states, both binary32 values (module docstring)."""
    if opts.rnn_data is RnnData.SEED:
        return SEED_DATA
    names = [node.inputs[0], node.outputs[0]]
    missing = [n for n in names if n not in ranges]
    if missing:
        raise InvalidInputError(
            f"node {node.name!r} ({node.op_type}): rnn_data='calibrated' needs the calibrated "
            f"ranges of {missing}; calibrate the graph first or use rnn_data='seed'"
        )
    bounds = [tuple(ranges[n]) for n in names]  # (low, high), floats or per-channel arrays
    lo = min(0.0, *(float(np.min(low)) for low, _ in bounds))
    hi = max(0.0, *(float(np.max(high)) for _, high in bounds))
    if not hi > lo:
        return SEED_DATA
    scale = float(np.float32(255.0 / (hi - lo)))
    shift = float(np.clip(np.rint(-lo * scale), 0, 255))
    return scale, shift


def rnn_output_encoding(scale: float, shift: float) -> TorchU8Encoding:
    """The ``quint8`` encoding of the primitive's u8 states: ``(1 / scale, shift)``."""
    return TorchU8Encoding(1.0 / scale, int(shift))
