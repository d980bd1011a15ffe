"""Adapters from the conformance vector format (``nnie.md``) to the NNIE operators.

Both operators take the attributes ``clip`` (a JSON number, read as a float64) and ``bits``
(must be 8; anything else raises :class:`~quantemu.errors.UnsupportedError`, which the runner
reports as *unsupported*).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from quantemu.backends.nnie.ops import log_dequantize, log_quantize
from quantemu.backends.nnie.params import LogQuantParams
from quantemu.backends.registry import register
from quantemu.errors import InvalidInputError

_ATTRS = frozenset({"clip", "bits"})


def _input(inputs: Mapping[str, np.ndarray], name: str, op: str) -> np.ndarray:
    if set(inputs) != {name}:
        raise InvalidInputError(
            f"nnie/{op}: expects exactly one input {name!r}, got {sorted(inputs)}"
        )
    return inputs[name]


@register("nnie", "log_quantize", attrs=_ATTRS)
def conformance_log_quantize(
    inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """NNIE 8-bit log quantization: float32 ``x`` -> uint8 ``code`` and float32 ``y``."""
    params = LogQuantParams.from_attrs(attrs, "nnie/log_quantize")
    code, y = log_quantize(_input(inputs, "x", "log_quantize"), params.clip, params.bits)
    return {"code": code, "y": y}


@register("nnie", "log_dequantize", attrs=_ATTRS)
def conformance_log_dequantize(
    inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """NNIE 8-bit log dequantization: uint8 ``code`` -> float32 ``y``."""
    params = LogQuantParams.from_attrs(attrs, "nnie/log_dequantize")
    code = _input(inputs, "code", "log_dequantize")
    return {"y": log_dequantize(code, params.clip, params.bits)}
