"""Boundary-biased hypothesis strategies for the XS3 tests (small shapes, rail-near biases)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from quantemu.backends.xs3 import pack_bso

INT8_EDGES = [-128, -127, -1, 0, 1, 126, 127]
INT16_EDGES = [-32768, -32767, -1, 0, 1, 16384, 32767]

int8_values = st.one_of(st.sampled_from(INT8_EDGES), st.integers(-128, 127))
biases = st.one_of(
    st.integers(-(2**20), 2**20),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(2**31 - 2**22, 2**31 - 1),  # running sums cross the positive rail
    st.integers(-(2**31), -(2**31) + 2**22),  # ... and the negative one
    st.sampled_from([0, -(2**31), 2**31 - 1, -(2**31) + 1]),
)
shifts = st.one_of(st.integers(0, 31), st.sampled_from([0, 1, 8, 16, 24, 31]))
int16_values = st.one_of(st.sampled_from(INT16_EDGES), st.integers(-32768, 32767))


FIELDS = ("shift1", "scale", "offset_scale", "offset", "shift2")


def pack_bso_rows(bias, *rest):
    """``pack_bso`` with the six per-channel fields given in BSO order."""
    arrays_ = [np.asarray(v, dtype=np.int64) for v in (bias, *rest)]
    return pack_bso(arrays_[0], **dict(zip(FIELDS, arrays_[1:], strict=True)))


def int8_arrays(shape):
    return arrays(np.int8, shape, elements=int8_values)


@st.composite
def bso_tensors(draw, channels: int, bias=biases):
    """A packed BSO for ``channels`` outputs with junk in the tail slots (which are ignored)."""
    fields = [
        draw(st.lists(bias, min_size=channels, max_size=channels)),
        draw(st.lists(shifts, min_size=channels, max_size=channels)),
        *(draw(st.lists(int16_values, min_size=channels, max_size=channels)) for _ in range(3)),
        draw(st.lists(shifts, min_size=channels, max_size=channels)),
    ]
    bso = pack_bso_rows(*fields)
    tail = bso.shape[0] * 16 - channels
    if tail:
        junk = draw(arrays(np.int16, (7, tail)))
        bso[-1, :, 16 - tail :] = junk
    return bso


@st.composite
def windows(draw, x_h: int, x_w: int, max_k: int = 3, max_kw: int | None = None):
    """A window and output size such that no window lies entirely in padding."""
    k_h = draw(st.integers(1, max_k))
    k_w = draw(st.integers(1, max_kw or max_k))
    sv, sh = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    r0 = draw(st.integers(-(k_h - 1) - 1, x_h - 1).filter(lambda v: v + k_h > 0))
    c0 = draw(st.integers(-(k_w - 1) - 1, x_w - 1).filter(lambda v: v + k_w > 0))
    yh = draw(st.integers(1, min(3, (x_h - 1 - r0) // sv + 1)))
    yw = draw(st.integers(1, min(3, (x_w - 1 - c0) // sh + 1)))
    window = {
        "height": k_h,
        "width": k_w,
        "start_row": r0,
        "start_col": c0,
        "stride_v": sv,
        "stride_h": sh,
    }
    return window, {"height": yh, "width": yw}


def rail_biases(spread: int):
    """Biases within ``spread`` of either rail: running sums of that size cross it part-way."""
    rail = 2**31 - 1
    near = st.integers(0, spread)
    return st.one_of(near.map(lambda d: rail - d), near.map(lambda d: -rail - 1 + d))
