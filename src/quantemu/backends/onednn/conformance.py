"""Conformance adapters: vector attributes/inputs -> params and ops (``conformance/onednn.md``).

Each adapter declares exactly the attribute names of the page, builds the frozen parameters
(which validate them) and calls the pure op. Extra outputs (counters) are returned beside the
page's outputs; the runner compares only what a case expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from quantemu.backends.onednn.conv import conv2d
from quantemu.backends.onednn.matmul import matmul
from quantemu.backends.onednn.params import (
    AvgPool2dParams,
    Conv2dParams,
    ConvGeometry,
    MatmulParams,
    MaxPool2dParams,
    QuantizedConv2dParams,
    QuantizedLinearParams,
    ReorderParams,
    Requantization,
    from_mapping,
)
from quantemu.backends.onednn.pool import avg_pool2d, max_pool2d
from quantemu.backends.onednn.reorder import reorder
from quantemu.backends.onednn.requant import quantized_conv2d, quantized_linear
from quantemu.backends.onednn.rnn import gru, lstm
from quantemu.backends.onednn.rnn_params import RnnParams
from quantemu.backends.registry import register
from quantemu.errors import InvalidInputError

BACKEND = "onednn"
GEOMETRY = ("strides", "pads", "dilations", "groups")
RNN = ("isa", "direction", "layers", "data_scale", "data_shift", "weights_scales_mask")
QUANT = ("x_scale", "x_zero_point", "w_scales", "y_scale", "y_zero_point")
ATTRS = {
    "matmul": frozenset({"isa", "api", "src_dt", "src_zero_point"}),
    "conv2d": frozenset({"isa", "src_dt", "impl", "src_zero_point", *GEOMETRY}),
    "quantized_linear": frozenset({"isa", "impl", *QUANT}),
    "quantized_conv2d": frozenset({"isa", "impl", *QUANT, *GEOMETRY}),
    "avg_pool2d": frozenset({"isa", "kernel", "strides", "pads", "exclude_padding", "impl"}),
    "max_pool2d": frozenset({"isa", "kernel", "strides", "pads"}),
    "reorder": frozenset({"isa", "dst_dt", "src_scale", "dst_scale"}),
    "lstm": frozenset(RNN),
    "gru": frozenset(RNN),
}


def _inputs(op: str, inputs: Mapping[str, np.ndarray], required: tuple, optional=()) -> list:
    unknown = sorted(set(inputs) - set(required) - set(optional))
    missing = [name for name in required if name not in inputs]
    if unknown or missing:
        raise InvalidInputError(
            f"onednn/{op}: inputs must be {', '.join(required)}"
            + (f" (optional: {', '.join(optional)})" if optional else "")
            + f"; got {', '.join(sorted(inputs)) or 'none'}"
        )
    return [inputs.get(name) for name in (*required, *optional)]


def _split(attrs: Mapping[str, Any], names: tuple) -> tuple[dict, dict]:
    """``attrs`` split into the keys in ``names`` and the rest."""
    inner = {k: v for k, v in attrs.items() if k in names}
    return inner, {k: v for k, v in attrs.items() if k not in names}


def _geometry(attrs: Mapping[str, Any], op: str) -> tuple[ConvGeometry, dict]:
    inner, rest = _split(attrs, GEOMETRY)
    return from_mapping(ConvGeometry, inner, f"onednn/{op}"), rest


@register(BACKEND, "matmul", attrs=ATTRS["matmul"])
def matmul_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """Raw s32 accumulators of A(M,K)·B(K,N) (page §3)."""
    a, b = _inputs("matmul", inputs, ("A", "B"))
    result = matmul(a, b, from_mapping(MatmulParams, attrs, "onednn/matmul"))
    return {"C": result.acc, "saturated_pairs": result.saturated_pairs}


@register(BACKEND, "conv2d", attrs=ATTRS["conv2d"])
def conv2d_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """Raw s32 accumulators of an int8 convolution (page §5)."""
    x, w = _inputs("conv2d", inputs, ("x", "w"))
    geometry, rest = _geometry(attrs, "conv2d")
    params = from_mapping(Conv2dParams, {**rest, "geometry": geometry}, "onednn/conv2d")
    result = conv2d(x, w, params)
    return {"y": result.acc, "saturated_pairs": result.saturated_pairs}


@register(BACKEND, "quantized_linear", attrs=ATTRS["quantized_linear"])
def quantized_linear_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """PyTorch quantized::linear on the onednn engine, u8 -> u8 (page §6)."""
    x, w, bias = _inputs("quantized_linear", inputs, ("x", "w"), ("bias",))
    inner, rest = _split(attrs, QUANT)
    quant = from_mapping(Requantization, inner, "onednn/quantized_linear")
    params = from_mapping(QuantizedLinearParams, {**rest, "quant": quant}, "quantized_linear")
    result = quantized_linear(x, w, params, bias)
    return {"y": result.y, "saturated_pairs": result.saturated_pairs}


@register(BACKEND, "quantized_conv2d", attrs=ATTRS["quantized_conv2d"])
def quantized_conv2d_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """PyTorch quantized::conv2d on the onednn engine, u8 -> u8 (page §6)."""
    x, w, bias = _inputs("quantized_conv2d", inputs, ("x", "w"), ("bias",))
    geometry, rest = _geometry(attrs, "quantized_conv2d")
    inner, rest = _split(rest, QUANT)
    quant = from_mapping(Requantization, inner, "onednn/quantized_conv2d")
    params = from_mapping(
        QuantizedConv2dParams,
        {**rest, "quant": quant, "geometry": geometry},
        "onednn/quantized_conv2d",
    )
    result = quantized_conv2d(x, w, params, bias)
    return {"y": result.y, "saturated_pairs": result.saturated_pairs}


@register(BACKEND, "avg_pool2d", attrs=ATTRS["avg_pool2d"])
def avg_pool2d_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """int8/uint8 average pooling (page §7)."""
    (x,) = _inputs("avg_pool2d", inputs, ("x",))
    return {"y": avg_pool2d(x, from_mapping(AvgPool2dParams, attrs, "onednn/avg_pool2d"))}


@register(BACKEND, "max_pool2d", attrs=ATTRS["max_pool2d"])
def max_pool2d_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """int8/uint8 max pooling (page §7)."""
    (x,) = _inputs("max_pool2d", inputs, ("x",))
    return {"y": max_pool2d(x, from_mapping(MaxPool2dParams, attrs, "onednn/max_pool2d"))}


@register(BACKEND, "reorder", attrs=ATTRS["reorder"])
def reorder_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """f32 -> s8/u8 quantizing reorder with runtime scales (page §8)."""
    (x,) = _inputs("reorder", inputs, ("x",))
    return {"y": reorder(x, from_mapping(ReorderParams, attrs, "onednn/reorder"))}


RNN_INPUTS = ("src_layer", "weights_layer", "weights_iter", "weights_scales")


def _rnn_params(op: str, attrs: Mapping[str, Any], layers: int) -> RnnParams:
    inner, rest = _split(attrs, ("layers",))
    if inner.get("layers", layers) != layers:
        raise InvalidInputError(
            f"onednn/{op}: layers = {inner['layers']!r} but weights_layer holds {layers} layers"
        )
    return from_mapping(RnnParams, rest, f"onednn/{op}")


def _rnn_outputs(result) -> dict:
    out = {"dst_layer": result.dst_layer, "dst_iter": result.dst_iter}
    if result.dst_iter_c is not None:
        out["dst_iter_c"] = result.dst_iter_c
    return {**out, "saturated_pairs": result.saturated_pairs}


@register(BACKEND, "lstm", attrs=ATTRS["lstm"])
def lstm_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """int8 LSTM forward inference (README "RNN")."""
    x, wl, wi, ws, *rest = _inputs("lstm", inputs, RNN_INPUTS, ("bias", "src_iter", "src_iter_c"))
    params = _rnn_params("lstm", attrs, np.shape(wl)[0])
    bias, h0, c0 = rest
    return _rnn_outputs(lstm(x, wl, wi, ws, params, bias=bias, src_iter=h0, src_iter_c=c0))


@register(BACKEND, "gru", attrs=ATTRS["gru"])
def gru_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """int8 GRU forward inference (README "RNN")."""
    x, wl, wi, ws, bias, h0 = _inputs("gru", inputs, RNN_INPUTS, ("bias", "src_iter"))
    params = _rnn_params("gru", attrs, np.shape(wl)[0])
    return _rnn_outputs(gru(x, wl, wi, ws, params, bias=bias, src_iter=h0))
