"""Parameters of oneDNN's int8 RNN primitive (LSTM, GRU): frozen and validated.

The names follow oneDNN's ``rnn_data_qparams`` (``scale``, ``shift``: ``u8 = scale * h + shift``)
and ``rnn_weights_qparams`` (``mask`` over the ``ldigo`` weights: 0 = one scale, 24 = one scale
per gate and output channel, dims 3 and 4).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
from typing import Any

import numpy as np

from quantemu.backends.onednn.params import Isa, as_binary32, check_fields
from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = ["WEIGHTS_MASKS", "RnnCell", "RnnDirection", "RnnParams"]

#: ``rnn_weights_qparams`` masks the emulation covers: per tensor, per gate and output channel.
WEIGHTS_MASKS = (0, 24)


class RnnCell(enum.Enum):
    """The cell (``alg_kind``): gate count and post-GEMM arithmetic."""

    LSTM = "lstm"  # vanilla_lstm: gates i, f, c~, o
    GRU = "gru"  # vanilla_gru: gates u, r, c~; the reset gate multiplies h before its GEMM
    LBR_GRU = "lbr_gru"  # lbr_gru: the reset gate multiplies W_h·h + b (linear before reset)

    @property
    def gates(self) -> int:
        """How many gates the weights hold (``G`` of ``ldigo``)."""
        return 4 if self is RnnCell.LSTM else 3


class RnnDirection(enum.Enum):
    """oneDNN's ``rnn_direction``: how directions run and how ``dst_layer`` joins them."""

    L2R = "l2r"  # unidirectional_left2right
    R2L = "r2l"  # unidirectional_right2left
    CONCAT = "concat"  # bidirectional_concat: dst_layer = [l2r, r2l] along channels
    SUM = "sum"  # bidirectional_sum: dst_layer = sat_u8(l2r + r2l) on the u8 codes

    @property
    def directions(self) -> int:
        """``D`` of the state and weight tensors."""
        return 2 if self in (RnnDirection.CONCAT, RnnDirection.SUM) else 1


def _shift(value: Any) -> float:
    """A finite binary32 data shift as a Python float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInputError(f"rnn data_shift = {value!r} must be a number")
    v = float(value)
    if not math.isfinite(v) or float(np.float32(v)) != v:
        raise InvalidInputError(
            f"rnn data_shift = {v!r} must be a finite binary32 value (nearest: "
            f"{float(np.float32(v))!r}); oneDNN keeps it in f32: round it with numpy.float32"
        )
    return v


@dataclasses.dataclass(frozen=True)
class RnnParams:
    """int8 forward inference of ``lstm`` / ``gru`` (u8 states, s8 weights, f32 bias).

    ``isa`` picks the GEMM's dot product (pair-saturating ``vpmaddubsw`` on AVX2 and AVX512_CORE,
    exact with VNNI); ``data_scale``/``data_shift`` quantize every hidden state,
    ``u8 = sat(rne(h * scale + shift))``; ``weights_scales_mask`` says how many weight scales
    there are (0: one, 24: one per gate and output channel).
    """

    isa: Isa
    direction: RnnDirection = RnnDirection.L2R
    data_scale: float = 127.0
    data_shift: float = 128.0
    weights_scales_mask: int = 24

    def __post_init__(self) -> None:
        check_fields(self, "rnn", isa=Isa, direction=RnnDirection)
        object.__setattr__(self, "data_scale", as_binary32(self.data_scale, "rnn data_scale"))
        object.__setattr__(self, "data_shift", _shift(self.data_shift))
        mask = self.weights_scales_mask
        if isinstance(mask, bool) or mask not in WEIGHTS_MASKS:
            raise UnsupportedError(
                f"rnn weights_scales_mask = {mask!r} is not covered; use 0 (one scale) or 24 "
                "(one per gate and output channel, ldigo dims 3 and 4)"
            )
