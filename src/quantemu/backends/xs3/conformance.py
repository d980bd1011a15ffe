"""Adapters from conformance vectors (``conformance/xs3.md``) to the XS3 operators.

Each adapter is registered with exactly the attribute names the page lists for its operator, so
a runner reports any other attribute as unsupported. ``symmetric_saturation`` defaults to false
(the page: "with symmetric_saturation false, or with no such attribute") and ``model`` to
``host_reference`` when absent; ``zero_point``, ``window`` and ``y_params`` are required.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from quantemu.backends.registry import register
from quantemu.backends.xs3.conv import (
    conv2d_1x1,
    conv2d_deep,
    conv2d_depthwise,
    conv2d_shallowin,
)
from quantemu.backends.xs3.fc import (
    fc_deepin_shallowout_8,
    fc_deepin_shallowout_16,
    fully_connected_8,
    fully_connected_16,
)
from quantemu.backends.xs3.params import (
    ConvParams,
    Model,
    OutputOptions,
    Window,
    YParams,
    check_keys,
)

XS3 = "xs3"
CONV_ATTRS = frozenset({"zero_point", "window", "y_params", "symmetric_saturation", "model"})
OUTPUT_ATTRS = frozenset({"symmetric_saturation", "model"})
MODEL_ATTRS = frozenset({"model"})


def _inputs(inputs: Mapping[str, np.ndarray], names: tuple[str, ...], op: str) -> list:
    check_keys(inputs, f"{op} inputs", names)
    return [inputs[n] for n in names]


def _options(attrs: Mapping[str, Any]) -> OutputOptions:
    return OutputOptions(
        attrs.get("symmetric_saturation", False),
        Model.parse(attrs.get("model", Model.HOST_REFERENCE.value)),
    )


def _conv_params(attrs: Mapping[str, Any], op: str) -> ConvParams:
    check_keys(
        attrs,
        f"{op} attrs",
        ("zero_point", "window", "y_params"),
        ("symmetric_saturation", "model"),
    )
    return ConvParams(
        attrs["zero_point"],
        Window.from_attrs(attrs["window"]),
        YParams.from_attrs(attrs["y_params"]),
        _options(attrs),
    )


def _model(attrs: Mapping[str, Any], op: str) -> Model:
    check_keys(attrs, f"{op} attrs", (), ("model",))
    return Model.parse(attrs.get("model", Model.HOST_REFERENCE.value))


@register(XS3, "conv2d_deep", attrs=CONV_ATTRS)
def run_conv2d_deep(inputs, attrs):
    """lib_nn conv2d_deep (BSO, per-32-chunk saturation, padded-row order)."""
    x, k, bso = _inputs(inputs, ("X", "K", "BSO"), "conv2d_deep")
    return {"Y": conv2d_deep(x, k, bso, _conv_params(attrs, "conv2d_deep")).y}


@register(XS3, "conv2d_shallowin", attrs=CONV_ATTRS)
def run_conv2d_shallowin(inputs, attrs):
    """lib_nn conv2d_shallowin (augmented 32-byte kernel rows, per-row saturation)."""
    x, k, bso = _inputs(inputs, ("X", "K", "BSO"), "conv2d_shallowin")
    return {"Y": conv2d_shallowin(x, k, bso, _conv_params(attrs, "conv2d_shallowin")).y}


@register(XS3, "conv2d_1x1", attrs=OUTPUT_ATTRS)
def run_conv2d_1x1(inputs, attrs):
    """lib_nn conv2d_1x1 (per-product saturation on the host)."""
    x, k, bso = _inputs(inputs, ("X", "K", "BSO"), "conv2d_1x1")
    check_keys(attrs, "conv2d_1x1 attrs", (), ("symmetric_saturation", "model"))
    return {"Y": conv2d_1x1(x, k, bso, _options(attrs)).y}


@register(XS3, "conv2d_depthwise", attrs=CONV_ATTRS)
def run_conv2d_depthwise(inputs, attrs):
    """lib_nn conv2d_depthwise (int32 wrap-around on the host)."""
    x, k, bso = _inputs(inputs, ("X", "K", "BSO"), "conv2d_depthwise")
    return {"Y": conv2d_depthwise(x, k, bso, _conv_params(attrs, "conv2d_depthwise")).y}


@register(XS3, "fully_connected_8", attrs=OUTPUT_ATTRS)
def run_fully_connected_8(inputs, attrs):
    """lib_nn fully_connected_8 (one saturation at the end on the host)."""
    w, x, bso = _inputs(inputs, ("W", "X", "BSO"), "fully_connected_8")
    check_keys(attrs, "fully_connected_8 attrs", (), ("symmetric_saturation", "model"))
    return {"Y": fully_connected_8(w, x, bso, _options(attrs)).y}


@register(XS3, "fully_connected_16", attrs=MODEL_ATTRS)
def run_fully_connected_16(inputs, attrs):
    """lib_nn fully_connected_16 (int16 output, wrapping second rounding add)."""
    w, x, bso = _inputs(inputs, ("W", "X", "BSO"), "fully_connected_16")
    return {"Y": fully_connected_16(w, x, bso, _model(attrs, "fully_connected_16")).y}


_LEGACY_INPUTS = ("W", "B", "X", "shifts", "scales")


@register(XS3, "fc_deepin_shallowout_16", attrs=MODEL_ATTRS)
def run_fc_deepin_shallowout_16(inputs, attrs):
    """lib_nn legacy fc_deepin_shallowout_16 (Q1.14 scale, wrap-then-lift accumulation)."""
    op = "fc_deepin_shallowout_16"
    args = _inputs(inputs, _LEGACY_INPUTS, op)
    return {"Y": fc_deepin_shallowout_16(*args, model=_model(attrs, op)).y}


@register(XS3, "fc_deepin_shallowout_8", attrs=MODEL_ATTRS)
def run_fc_deepin_shallowout_8(inputs, attrs):
    """lib_nn legacy fc_deepin_shallowout_8 (as the 16-bit one, then a symmetric >>8)."""
    op = "fc_deepin_shallowout_8"
    args = _inputs(inputs, _LEGACY_INPUTS, op)
    return {"Y": fc_deepin_shallowout_8(*args, model=_model(attrs, op)).y}
