"""Hypothesis strategies for the nvdla tests: raw register sets and inputs, boundary-biased.

The field values come from the shared edge strategies in :mod:`tests.strategies`.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from tests.strategies import signed_ints, unsigned_ints

from quantemu.backends.nvdla import CdpRegisters, PdpRegisters, SdpRegisters


def raw(bits: int) -> st.SearchStrategy[int]:
    """A raw field value, often at a boundary of its unsigned or two's-complement reading."""
    return unsigned_ints(bits)


def signed(bits: int) -> st.SearchStrategy[int]:
    """A signed ``bits``-bit value, boundary-biased."""
    return signed_ints(bits)


def field_sets(block, overrides: dict | None = None) -> st.SearchStrategy[dict]:
    """Every field of ``block`` drawn raw; ``overrides`` maps a field to its own strategy."""
    overrides = overrides or {}
    return st.fixed_dictionaries(
        {name: overrides.get(name, raw(bits)) for name, bits in block.widths().items()}
    )


def int_list(n: int, bits: int) -> st.SearchStrategy[list[int]]:
    return st.lists(signed(bits), min_size=n, max_size=n)


@st.composite
def sdp_cases(draw):
    """(attrs, inputs as lists) for the sdp op; LUT starts are often placed near the data."""
    n = draw(st.integers(1, 12))
    attrs = draw(
        field_sets(
            SdpRegisters,
            {"PROC_PRECISION": st.sampled_from([0, 1]), "OUT_PRECISION": st.sampled_from([0, 1])},
        )
    )
    x = draw(int_list(n, 32))
    if draw(st.booleans()):  # small data so that LUT hits and slopes show up
        x = draw(st.lists(st.integers(-3000, 3000), min_size=n, max_size=n))
        for name in ("LUT_LE_START", "LUT_LO_START"):
            attrs[name] = draw(st.integers(-3000, 3000)) % (1 << 32)
        for name in ("LUT_LE_INDEX_SELECT", "LUT_LO_INDEX_SELECT"):
            attrs[name] = draw(st.integers(-3, 8)) % 256
        attrs["LUT_LE_INDEX_OFFSET"] = draw(st.integers(-4, 12)) % 256
    inputs = {"X": x}
    for name in ("BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL", "EW_ALU", "EW_MUL"):
        if draw(st.booleans()):
            inputs[name] = draw(int_list(n, 16))
    inputs["LUT_LE"] = draw(int_list(65, 16))
    inputs["LUT_LO"] = draw(int_list(257, 16))
    return attrs, inputs


@st.composite
def cdp_cases(draw):
    """(attrs, inputs as lists) for the cdp op (C + 8 channels, C in 1..8)."""
    attrs = draw(field_sets(CdpRegisters, {"INPUT_DATA_TYPE": st.sampled_from([0, 1])}))
    bits = 8 if attrs["INPUT_DATA_TYPE"] == 0 else 16
    c = draw(st.integers(1, 8))
    if draw(st.booleans()):  # LRN-like programming: starts near 0, moderate selects
        for name in ("LUT_LE_START", "LUT_LE_END", "LUT_LO_START", "LUT_LO_END"):
            attrs[name + "_HIGH"] = draw(st.sampled_from([0, 63]))
            attrs[name + "_LOW"] = (
                draw(st.integers(0, 1 << 16))
                if attrs[name + "_HIGH"] == 0
                else (1 << 32) - draw(st.integers(1, 1 << 16))
            )
        attrs["LUT_LE_INDEX_SELECT"] = draw(st.integers(-24, 30)) % 256
        attrs["LUT_LO_INDEX_SELECT"] = draw(st.integers(-24, 30)) % 256
        attrs["LUT_LE_INDEX_OFFSET"] = draw(st.integers(-20, 40)) % 256
    inputs = {"X": draw(int_list(c + 8, bits))}
    inputs["LUT_LE"] = draw(int_list(65, 16))
    inputs["LUT_LO"] = draw(int_list(257, 16))
    return attrs, inputs


@st.composite
def pdp_cases(draw, method: int | None = None):
    """(attrs, X as a [C, H, W] int array) with a consistent geometry (pads < kernel)."""
    kw, kh = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    sw, sh = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    pl, pr = draw(st.integers(0, kw - 1)), draw(st.integers(0, kw - 1))
    pt, pb = draw(st.integers(0, kh - 1)), draw(st.integers(0, kh - 1))
    w = draw(st.integers(max(1, kw - pl - pr), 10))
    h = draw(st.integers(max(1, kh - pt - pb), 10))
    c = draw(st.integers(1, 3))
    int8 = draw(st.booleans())
    attrs = draw(field_sets(PdpRegisters))
    attrs |= {
        "INPUT_DATA": 0 if int8 else 1,
        "POOLING_METHOD": draw(st.sampled_from([0, 1, 2])) if method is None else method,
        "SPLIT_NUM": 0,
        "CUBE_IN_WIDTH": w - 1,
        "CUBE_IN_HEIGHT": h - 1,
        "CUBE_IN_CHANNEL": c - 1,
        "CUBE_OUT_WIDTH": (w + pl + pr - kw) // sw,
        "CUBE_OUT_HEIGHT": (h + pt + pb - kh) // sh,
        "CUBE_OUT_CHANNEL": c - 1,
        "KERNEL_WIDTH": kw - 1,
        "KERNEL_HEIGHT": kh - 1,
        "KERNEL_STRIDE_WIDTH": sw - 1,
        "KERNEL_STRIDE_HEIGHT": sh - 1,
        "PAD_LEFT": pl,
        "PAD_RIGHT": pr,
        "PAD_TOP": pt,
        "PAD_BOTTOM": pb,
    }
    if draw(st.booleans()):  # firmware reciprocals
        attrs["RECIP_KERNEL_WIDTH"] = (1 << 16) // kw
        attrs["RECIP_KERNEL_HEIGHT"] = (1 << 16) // kh
    bits = 8 if int8 else 16
    data = draw(int_list(c * h * w, bits))
    return attrs, np.array(data, dtype=np.int8 if int8 else np.int16).reshape(c, h, w)


@st.composite
def cacc_cases(draw):
    """(attrs, P as a [K, N] int64 array) within the CMAC partial-sum widths."""
    prec = draw(st.sampled_from([0, 1]))
    bits = 22 if prec == 0 else 38
    k, n = draw(st.integers(1, 24)), draw(st.integers(1, 6))
    data = draw(int_list(k * n, bits))
    attrs = {"PROC_PRECISION": prec, "CLIP_TRUNCATE": draw(st.integers(0, 16))}
    return attrs, np.array(data, dtype=np.int64).reshape(k, n)
