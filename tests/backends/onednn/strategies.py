"""Boundary-biased hypothesis strategies for the onednn tests (small shapes, saturation-prone)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from quantemu.backends.onednn import ConvGeometry, Isa
from tests.strategies import edge_biased, signed_edges, unsigned_edges

ISAS = list(Isa)
# Beyond the type's own edges, values where a u8*s8 pair sum a0*b0 + a1*b1 nears the s16 rail
# (2*255*64 = 32640, 2*200*82 = 32800), so that pairs saturate often.
U8_EDGES = unsigned_edges(8, extra=[200])
S8_EDGES = signed_edges(8, extra=[-65, -64, -63, 63, 64, 65])


def values(dtype, shape) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` mixing the type's edges (where pairs saturate) with uniform values."""
    info = np.iinfo(dtype)
    edges = U8_EDGES if dtype == np.uint8 else S8_EDGES
    element = edge_biased(edges, int(info.min), int(info.max))
    size = int(np.prod(shape))
    return st.lists(element, min_size=size, max_size=size).map(
        lambda v: np.array(v, dtype=dtype).reshape(shape)
    )


@st.composite
def saturating_values(draw, dtype, shape) -> np.ndarray:
    """Like :func:`values`, but often all near one rail (u8 near 255, s8 near ±127 of one sign)."""
    mode = draw(st.sampled_from(["mixed", "rail", "rail"]))
    if mode == "mixed":
        return draw(values(dtype, shape))
    size = int(np.prod(shape))
    if dtype == np.uint8:
        element = st.integers(200, 255)
    else:
        sign = draw(st.sampled_from([-1, 1]))
        element = st.integers(90, 127).map(lambda v: sign * v) | st.sampled_from([-128, 0])
    data = draw(st.lists(element, min_size=size, max_size=size))
    return np.array(data, dtype=dtype).reshape(shape)


@st.composite
def conv_geometry(draw, kernel: tuple[int, int], hw: tuple[int, int], groups: int = 1):
    """Strides, asymmetric pads (smaller than the kernel) and dilations; needs h >= kh, w >= kw."""
    (kh, kw), (h, w) = kernel, hw
    pads = (
        draw(st.integers(0, kh - 1)),
        draw(st.integers(0, kw - 1)),
        draw(st.integers(0, kh - 1)),
        draw(st.integers(0, kw - 1)),
    )
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    if (
        h + pads[0] + pads[2] < (kh - 1) * dil[0] + 1
        or w + pads[1] + pads[3] < (kw - 1) * dil[1] + 1
    ):
        dil = (1, 1)  # the dense window always fits (h >= kh, w >= kw)
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return ConvGeometry(strides, pads, dil, groups)
