"""Float -> integer parameters as the toolchains choose them for oneDNN's int8 kernels.

PyTorch (``shared/notes/toolchains.md``): per-tensor asymmetric u8 activations and per-channel
symmetric s8 weights from min/max observers, optionally with ``reduce_range`` (7-bit activations,
the default of PyTorch's x86 qconfig, precisely to avoid VPMADDUBSW saturation). The helpers below
repeat the observers' ``_calculate_qparams`` in binary32 (torch 2.13), so the scales come out as
the binary32 values that ``Requantization`` expects.

RNN u8 quantization (seed 002):

Seed 002 ("Nuances of int8 computations", §1.1): the RNN primitive takes non-symmetric u8 data,
``data_f32 = (data_u8 − shift) / scale``, and does not handle VPMADDUBSW overflow itself. Its
recommended parameters avoid it:

- data (hidden states): ``scale = 127``, ``shift = 128``;
- weights: ``scale = 63 / W_max`` with ``W_max = max|W_f32|`` (so ``|w_s8| <= 63``: s7 weights,
  and ``255·63·2 = 32130`` cannot saturate s16).

The conversions below are binary32 multiply, add, round half to even, saturate, as oneDNN's
quantizing reorders do. The RNN paths are not covered by the conformance vectors (page §9), so
the exact f32 operation order here is the natural one, not a pinned one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.f32 import f32, to_8bit
from quantemu.errors import InvalidInputError

RNN_DATA_SCALE = 127.0
RNN_DATA_SHIFT = 128.0
RNN_WEIGHTS_QMAX = 63
_EPS = np.finfo(np.float32).eps  # torch.finfo(torch.float32).eps, the observers' scale floor


def activation_qparams(x_min: float, x_max: float, *, reduce_range: bool = False):
    """``(scale, zero_point)`` of PyTorch's ``MinMaxObserver`` for quint8 (per-tensor affine).

    ``scale = (max(x_max, 0) − min(x_min, 0)) / (qmax − qmin)`` in binary32, at least float32 eps;
    ``zero_point = clamp(qmin − round_half_even(min(x_min, 0) / scale), qmin, qmax)``, with
    ``[qmin, qmax] = [0, 127]`` under ``reduce_range`` and ``[0, 255]`` otherwise.

    >>> activation_qparams(-1.0, 3.0)
    (0.01568627543747425, 64)
    """
    lo_f, hi_f = f32(x_min), f32(x_max)
    if not (np.isfinite(lo_f) and np.isfinite(hi_f)) or lo_f > hi_f:
        raise InvalidInputError(
            f"activation_qparams: need finite x_min <= x_max, got {x_min!r}, {x_max!r}"
        )
    qmin, qmax = 0, 127 if reduce_range else 255
    lo = np.minimum(lo_f, np.float32(0))
    hi = np.maximum(hi_f, np.float32(0))
    with np.errstate(over="ignore"):
        span = hi - lo
    if not np.isfinite(span):
        raise InvalidInputError(
            f"activation_qparams: the range [{x_min!r}, {x_max!r}] is wider than float32 holds "
            "(the model's activations reach about 1e38: check its weights and the data's scale)"
        )
    scale = np.maximum(span / f32(qmax - qmin), _EPS)
    zero_point = min(max(qmin - int(np.round(lo / scale)), qmin), qmax)
    return float(scale), zero_point


def weight_scales(w: np.ndarray, *, axis: int = 0, reduce_range: bool = False) -> np.ndarray:
    """Per-channel scales of PyTorch's ``PerChannelMinMaxObserver`` (qint8, symmetric).

    ``max(−min(w_min, 0), max(w_max, 0)) / ((qmax − qmin) / 2)`` per channel along ``axis``, in
    binary32 and at least float32 eps; ``[qmin, qmax] = [−128, 127]`` (``[−64, 63]`` under
    ``reduce_range``), so the divisor is 127.5 (63.5).
    """
    w = _float_array(w, "weight_scales: w")
    flat = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    if flat.shape[1] == 0:
        raise InvalidInputError(f"weight_scales: w of shape {w.shape} has empty channels")
    lo = np.minimum(flat.min(axis=1), np.float32(0))
    hi = np.maximum(flat.max(axis=1), np.float32(0))
    half_range = f32(63.5 if reduce_range else 127.5)
    return np.maximum(np.maximum(-lo, hi) / half_range, _EPS)


@dataclass(frozen=True)
class RnnDataQParams:
    """``set_rnn_data_qparams(scale, shift)``: ``data_f32 = (data_u8 − shift) / scale``."""

    scale: float = RNN_DATA_SCALE
    shift: float = RNN_DATA_SHIFT

    def __post_init__(self) -> None:
        for name in ("scale", "shift"):
            v = getattr(self, name)
            if isinstance(v, bool) or not np.isfinite(v) or (name == "scale" and v <= 0):
                raise InvalidInputError(
                    f"RnnDataQParams.{name} = {v!r} must be a finite number"
                    + (" > 0" if name == "scale" else "")
                )


def rnn_weights_scales(w: np.ndarray, *, per_output_channel: bool = False, axis: int = 0):
    """``63 / W_max`` (float32), per tensor or per output channel along ``axis``.

    >>> rnn_weights_scales(np.array([[0.5, -1.0], [0.25, 0.125]], np.float32)).tolist()
    63.0
    >>> rnn_weights_scales(np.array([[0.5, -1.0], [0.25, 0.125]], np.float32),
    ...                    per_output_channel=True).tolist()
    [63.0, 252.0]
    """
    w = _float_array(w, "rnn_weights_scales: w")
    if per_output_channel:
        w_max = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1)
    else:
        w_max = np.abs(w).max() if w.size else np.float32(0)
    if np.any(w_max == 0):
        raise InvalidInputError(
            "rnn_weights_scales: W_max = 0 (all-zero weights) has no scale 63 / W_max; "
            "drop the all-zero channel or give it any positive scale"
        )
    return f32(RNN_WEIGHTS_QMAX) / f32(w_max)


def quantize_rnn_data(x: np.ndarray, qp: RnnDataQParams = RnnDataQParams()) -> np.ndarray:
    """u8 data ``clamp(rne(x ⊗ scale ⊕ shift), 0, 255)``.

    >>> quantize_rnn_data(np.array([-1.0, 0.0, 0.5, 1.0], np.float32)).tolist()
    [1, 128, 192, 255]
    """
    x = _float_array(x, "quantize_rnn_data: x")
    return to_8bit(x * f32(qp.scale) + f32(qp.shift), signed=False)


def dequantize_rnn_data(q: np.ndarray, qp: RnnDataQParams = RnnDataQParams()) -> np.ndarray:
    """The seed's ``(data_u8 − shift) / scale`` in binary32."""
    if not isinstance(q, np.ndarray) or q.dtype != np.uint8:
        raise InvalidInputError(f"dequantize_rnn_data: q must be a uint8 array, got {q!r}")
    return (q.astype(np.float32) - f32(qp.shift)) / f32(qp.scale)


def quantize_rnn_weights(w: np.ndarray, scales) -> np.ndarray:
    """s8 weights ``clamp(rne(w ⊗ scale), −128, 127)``; ``scales`` broadcast against ``w``.

    With the recommended ``scales = rnn_weights_scales(w)`` every value lies in [−63, 63].
    """
    w = _float_array(w, "quantize_rnn_weights: w")
    return to_8bit(w * f32(scales), signed=True)


def _float_array(x, where: str) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        got = f"{x.dtype.name} array" if isinstance(x, np.ndarray) else type(x).__name__
        raise InvalidInputError(f"{where} must be a float32 array, got {got}; use x.astype('f4')")
    return x
