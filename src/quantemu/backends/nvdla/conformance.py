"""Adapters from the conformance vector format (``conformance/nvdla.md``) to the nvdla ops.

Each adapter declares exactly the attribute names of the page (the register fields), builds the
unit's register block from them (every field must be present, as in the vectors), calls the op
and returns the page's output names with the page's dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from quantemu.backends.nvdla.cacc import cacc
from quantemu.backends.nvdla.cdp import cdp_window
from quantemu.backends.nvdla.fp16.cc import conv_fp16
from quantemu.backends.nvdla.operands import OPERANDS
from quantemu.backends.nvdla.pdp import pdp_avg, pdp_max, pdp_min
from quantemu.backends.nvdla.registers import (
    CaccRegisters,
    CdpRegisters,
    PdpRegisters,
    SdpRegisters,
)
from quantemu.backends.nvdla.sdp import sdp
from quantemu.backends.registry import register
from quantemu.errors import InvalidInputError


def _input(inputs: Mapping[str, np.ndarray], name: str, op: str) -> np.ndarray:
    if name not in inputs:
        raise InvalidInputError(f"nvdla/{op}: input {name} is missing (have {sorted(inputs)})")
    return inputs[name]


def _no_extra_inputs(inputs: Mapping[str, np.ndarray], known: set[str], op: str) -> None:
    extra = sorted(set(inputs) - known)
    if extra:
        raise InvalidInputError(
            f"nvdla/{op}: unknown input(s) {', '.join(extra)}; known: {', '.join(sorted(known))}"
        )


@register("nvdla", "sdp", attrs=frozenset(SdpRegisters.widths()))
def sdp_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """SDP pipeline BS -> BN -> EW(+LUT) -> output converter, with counters (§2)."""
    _no_extra_inputs(inputs, {"X", "LUT_LE", "LUT_LO", *OPERANDS}, "sdp")
    # NAN_TO_ZERO is an FP16 field (nvdla-fp16); the INT page's cases, without it, mean 0.
    regs = SdpRegisters.from_fields({"NAN_TO_ZERO": 0, **attrs}, complete=True)
    r = sdp(
        _input(inputs, "X", "sdp"),
        regs,
        operands={n: inputs[n] for n in OPERANDS if n in inputs},
        lut_le=inputs.get("LUT_LE"),
        lut_lo=inputs.get("LUT_LO"),
    )
    return {"Y": r.y, **r.counters()}


@register("nvdla", "cdp", attrs=frozenset(CdpRegisters.widths()))
def cdp_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """CDP (LRN) of one pixel's C + 8 channel values, with counters (§3)."""
    _no_extra_inputs(inputs, {"X", "LUT_LE", "LUT_LO"}, "cdp")
    regs = CdpRegisters.from_fields(attrs, complete=True)
    r = cdp_window(
        _input(inputs, "X", "cdp"),
        regs,
        _input(inputs, "LUT_LE", "cdp"),
        _input(inputs, "LUT_LO", "cdp"),
    )
    return {"Y": r.y, **r.counters()}


def _pdp_case(fn, op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    _no_extra_inputs(inputs, {"X"}, op)
    # FLYING_MODE and NAN_TO_ZERO matter in FP16 only; the INT page's cases, without them, mean 0.
    regs = PdpRegisters.from_fields({"FLYING_MODE": 0, "NAN_TO_ZERO": 0, **attrs}, complete=True)
    return {"Y": fn(_input(inputs, "X", op), regs)}


_PDP_ATTRS = frozenset(PdpRegisters.widths())


@register("nvdla", "pdp_avg", attrs=_PDP_ATTRS)
def pdp_avg_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """PDP average pooling with padding values and reciprocals (§4)."""
    return _pdp_case(pdp_avg, "pdp_avg", inputs, attrs)


@register("nvdla", "pdp_max", attrs=_PDP_ATTRS)
def pdp_max_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """PDP max pooling (§4)."""
    return _pdp_case(pdp_max, "pdp_max", inputs, attrs)


@register("nvdla", "pdp_min", attrs=_PDP_ATTRS)
def pdp_min_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """PDP min pooling (§4)."""
    return _pdp_case(pdp_min, "pdp_min", inputs, attrs)


@register("nvdla", "cacc", attrs=frozenset(CaccRegisters.widths()))
def cacc_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """CACC 48-bit accumulation, CLIP_TRUNCATE and int32 saturation count (§5)."""
    _no_extra_inputs(inputs, {"P"}, "cacc")
    r = cacc(_input(inputs, "P", "cacc"), CaccRegisters.from_fields(attrs, complete=True))
    return {"Y": r.y, "SAT_COUNT": r.SAT_COUNT}


#: the attrs of a ``conv_fp16`` case (plain values; PAD_VALUE an fp16 word)
CONV_ATTRS = ("STRIDE_X", "STRIDE_Y", "DILATION_X", "DILATION_Y")
CONV_ATTRS += ("PAD_LEFT", "PAD_TOP", "PAD_RIGHT", "PAD_BOTTOM", "PAD_VALUE")


@register("nvdla", "conv_fp16", attrs=frozenset(CONV_ATTRS))
def conv_fp16_case(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> dict:
    """Direct convolution in FP16 through CMAC and CACC: the fp32 words sent to the SDP."""
    _no_extra_inputs(inputs, {"X", "W"}, "conv_fp16")
    x, w = _input(inputs, "X", "conv_fp16"), _input(inputs, "W", "conv_fp16")
    missing = sorted(set(CONV_ATTRS) - set(attrs))
    if missing:
        raise InvalidInputError(f"conv_fp16: attrs {', '.join(missing)} are missing")
    y = conv_fp16(
        x,
        w,
        stride=(attrs["STRIDE_Y"], attrs["STRIDE_X"]),
        dilation=(attrs["DILATION_Y"], attrs["DILATION_X"]),
        padding=tuple(attrs[n] for n in ("PAD_LEFT", "PAD_TOP", "PAD_RIGHT", "PAD_BOTTOM")),
        pad_value=attrs["PAD_VALUE"],
    )
    return {"Y": y}
