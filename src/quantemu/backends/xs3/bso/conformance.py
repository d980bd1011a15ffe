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
from quantemu.backends.xs3.bso import conv, fc
from quantemu.backends.xs3.bso.params import (
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


def _output_options(attrs: Mapping[str, Any], op: str) -> OutputOptions:
    check_keys(attrs, f"{op} attrs", (), ("symmetric_saturation", "model"))
    return _options(attrs)


_XKB, _WXB = ("X", "K", "BSO"), ("W", "X", "BSO")
# The BSO operators: their inputs, attributes and parameters (the operator's last argument).
_BSO_OPS = (
    (conv.conv2d_deep, _XKB, CONV_ATTRS, _conv_params),
    (conv.conv2d_shallowin, _XKB, CONV_ATTRS, _conv_params),
    (conv.conv2d_1x1, _XKB, OUTPUT_ATTRS, _output_options),
    (conv.conv2d_depthwise, _XKB, CONV_ATTRS, _conv_params),
    (fc.fully_connected_8, _WXB, OUTPUT_ATTRS, _output_options),
    (fc.fully_connected_16, _WXB, MODEL_ATTRS, _model),
)
_WHAT = {
    "conv2d_deep": "BSO, per-32-chunk saturation, padded-row order",
    "conv2d_shallowin": "augmented 32-byte kernel rows, per-row saturation",
    "conv2d_1x1": "per-product saturation on the host",
    "conv2d_depthwise": "int32 wrap-around on the host",
    "fully_connected_8": "one saturation at the end on the host",
    "fully_connected_16": "int16 output, wrapping second rounding add",
}


def _bso_adapter(fn, names: tuple[str, ...], params):
    """The adapter of the BSO operator ``fn``: inputs checked first, then the attributes."""
    op = fn.__name__

    def run(inputs, attrs):
        a, b, bso = _inputs(inputs, names, op)
        return {"Y": fn(a, b, bso, params(attrs, op)).y}

    run.__name__ = run.__qualname__ = f"run_{op}"
    run.__doc__ = f"lib_nn {op} ({_WHAT[op]})."
    return run


for _fn, _names, _attrs, _params in _BSO_OPS:
    register(XS3, _fn.__name__, attrs=_attrs)(_bso_adapter(_fn, _names, _params))


_LEGACY_INPUTS = ("W", "B", "X", "shifts", "scales")


@register(XS3, "fc_deepin_shallowout_16", attrs=MODEL_ATTRS)
def run_fc_deepin_shallowout_16(inputs, attrs):
    """lib_nn legacy fc_deepin_shallowout_16 (Q1.14 scale, wrap-then-lift accumulation)."""
    op = "fc_deepin_shallowout_16"
    args = _inputs(inputs, _LEGACY_INPUTS, op)
    return {"Y": fc.fc_deepin_shallowout_16(*args, model=_model(attrs, op)).y}


@register(XS3, "fc_deepin_shallowout_8", attrs=MODEL_ATTRS)
def run_fc_deepin_shallowout_8(inputs, attrs):
    """lib_nn legacy fc_deepin_shallowout_8 (as the 16-bit one, then a symmetric >>8)."""
    op = "fc_deepin_shallowout_8"
    args = _inputs(inputs, _LEGACY_INPUTS, op)
    return {"Y": fc.fc_deepin_shallowout_8(*args, model=_model(attrs, op)).y}
