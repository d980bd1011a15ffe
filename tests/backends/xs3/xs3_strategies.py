"""Boundary-biased hypothesis strategies for the XS3 tests (small shapes, rail-near biases).

The value strategies are the shared ones of :mod:`tests.strategies`; this module builds the XS3
composites (packed BSO tensors, windows) on them.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tests.strategies import INT32_MAX, INT32_MIN, edge_biased, rail_near, signed_ints

from quantemu.backends.xs3 import pack_bso

int8_values = signed_ints(8)
biases = st.one_of(
    st.integers(-(2**20), 2**20),
    st.integers(INT32_MIN, INT32_MAX),
    rail_near(2**22),  # running sums cross either rail
    st.sampled_from([0, INT32_MIN, INT32_MAX, INT32_MIN + 1]),
)
shifts = edge_biased([0, 1, 8, 16, 24, 31], 0, 31)
int16_values = signed_ints(16, extra=[2**14])  # 2**14: the scale quantize derives at its top


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
    return rail_near(spread, bits=32)
