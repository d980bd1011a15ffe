"""The tensors of oneDNN's int8 RNN primitive, checked: dtypes, shapes and what oneDNN refuses.

Shapes use oneDNN's letters: T time steps, N batch, L layers, D directions, SLC input channels,
G gates, DHC hidden channels (``sic`` = DHC: no projection).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantemu.backends.onednn.params import check_operand
from quantemu.backends.onednn.rnn_params import RnnCell, RnnParams
from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = ["RnnInputs", "check_inputs"]


@dataclasses.dataclass(frozen=True)
class RnnInputs:
    """Checked inputs; absent optional ones are filled the way oneDNN fills them."""

    cell: RnnCell
    src_layer: np.ndarray  # (T, N, SLC) u8
    src_iter: np.ndarray  # (L, D, N, DHC) u8
    src_iter_c: np.ndarray  # (L, D, N, DHC) f32 (zeros for GRU: unused)
    weights_layer: np.ndarray  # (L, D, SLC, G, DHC) s8
    weights_iter: np.ndarray  # (L, D, DHC, G, DHC) s8
    weights_scales: np.ndarray  # (1,) or (G*DHC,) f32
    bias: np.ndarray  # (L, D, G, DHC) f32

    @property
    def layers(self) -> int:
        return self.weights_layer.shape[0]


def _array(name: str, x, dtype: str, ndim: int) -> np.ndarray:
    remedy = f"; convert it with numpy.asarray(..., dtype=numpy.{dtype})"
    check_operand(x, f"rnn {name}", dtype, ndim, remedy=remedy)
    return x


def _shape(name: str, x: np.ndarray, expected: tuple[int, ...], letters: str) -> None:
    if x.shape != expected:
        raise InvalidInputError(
            f"rnn {name} has shape {x.shape}; expected ({letters}) = {expected} from the other "
            "tensors"
        )


def _refuse_lbr() -> None:
    raise UnsupportedError(
        "rnn: int8 linear-before-reset GRU (lbr_gru) is not emulated: oneDNN 3.2.0 has no int8 "
        "implementation of it (dnnl_lbr_gru_forward_primitive_desc_create returns "
        "dnnl_unimplemented for u8 data at every ISA), so there is no behaviour to reproduce; "
        "use a vanilla GRU (linear_before_reset = 0) or run the cell in f32"
    )


def _weights(params: RnnParams, cell: RnnCell, weights_layer, weights_iter, weights_scales):
    wl = _array("weights_layer", weights_layer, "int8", 5)
    layers, dirs, slc, g, dhc = wl.shape
    if dirs != params.direction.directions or g != cell.gates or min(wl.shape) < 1:
        raise InvalidInputError(
            f"rnn weights_layer has shape {wl.shape} (L, D, SLC, G, DHC); {cell.value} with "
            f"direction {params.direction.value} needs D = {params.direction.directions}, "
            f"G = {cell.gates} and every size >= 1"
        )
    if layers > 1 and slc != dhc:
        raise InvalidInputError(
            f"rnn with {layers} layers needs SLC = DHC (layer l > 0 reads the {dhc} hidden "
            f"channels of layer l - 1 through the same weights_layer tensor), got SLC = {slc}; "
            "run the first layer as its own primitive"
        )
    wi = _array("weights_iter", weights_iter, "int8", 5)
    _shape("weights_iter", wi, (layers, dirs, dhc, g, dhc), "L, D, DHC, G, DHC")
    ws = _array("weights_scales", weights_scales, "float32", 1)
    count = 1 if params.weights_scales_mask == 0 else g * dhc
    _shape("weights_scales", ws, (count,), f"mask {params.weights_scales_mask}: scales")
    bad = ws[~(np.isfinite(ws) & (ws > 0))]
    if bad.size:
        raise InvalidInputError(
            f"rnn weights_scales must be finite and positive, got {bad[:4].tolist()}"
        )
    return wl, wi, ws


def _states(params: RnnParams, cell: RnnCell, shape, src_iter, src_iter_c):
    if src_iter is None:
        # No src_iter: oneDNN starts from the quantized zero, sat_u8(nearbyint(0*scale + shift)).
        zero = np.clip(np.rint(np.float32(params.data_shift)), 0, 255)
        src_iter = np.full(shape, zero, dtype=np.uint8)
    _shape("src_iter", _array("src_iter", src_iter, "uint8", 4), shape, "L, D, N, DHC")
    if src_iter_c is not None and cell is not RnnCell.LSTM:
        raise InvalidInputError(f"rnn src_iter_c is an LSTM input; {cell.value} has no cell state")
    if src_iter_c is None:
        src_iter_c = np.zeros(shape, dtype=np.float32)
    _shape("src_iter_c", _array("src_iter_c", src_iter_c, "float32", 4), shape, "L, D, N, DHC")
    return src_iter, src_iter_c


def check_inputs(cell: RnnCell, params: RnnParams, src: tuple, weights: tuple, bias) -> RnnInputs:
    """:class:`RnnInputs` from user arrays; ``InvalidInputError`` naming the offending tensor.

    ``src`` is ``(src_layer, src_iter, src_iter_c)``, ``weights`` ``(weights_layer,
    weights_iter, weights_scales)`` (:func:`~quantemu.backends.onednn.rnn.lstm` says what each is).
    """
    src_layer, src_iter, src_iter_c = src
    if cell is RnnCell.LBR_GRU:
        _refuse_lbr()
    if not isinstance(params, RnnParams):
        raise InvalidInputError(f"rnn params must be an RnnParams, got {type(params).__name__}")
    wl, wi, ws = _weights(params, cell, *weights)
    layers, dirs, slc, g, dhc = wl.shape
    x = _array("src_layer", src_layer, "uint8", 3)
    if x.shape[2] != slc or x.shape[0] < 1 or x.shape[1] < 1:
        raise InvalidInputError(
            f"rnn src_layer has shape {x.shape} (T, N, SLC); weights_layer needs SLC = {slc}, "
            "and T and N must be >= 1"
        )
    state_shape = (layers, dirs, x.shape[1], dhc)
    h0, c0 = _states(params, cell, state_shape, src_iter, src_iter_c)
    if bias is None:
        bias = np.zeros((layers, dirs, g, dhc), dtype=np.float32)
    _shape("bias", _array("bias", bias, "float32", 4), (layers, dirs, g, dhc), "L, D, G, DHC")
    return RnnInputs(cell, x, h0, c0, wl, wi, ws, bias)
