"""The fast dequantize paths (pairs of codes through one 64K-entry table, the 256-entry table
for the rest) give the same float32 bits as indexing the level table code by code."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.nnie.ops import _tables, dequantize_z


def _plain(codes: np.ndarray, z: int) -> np.ndarray:
    levels = _tables(z)[2]
    return np.array([levels[int(c)] for c in codes.ravel()], np.float32).reshape(codes.shape)


@settings(max_examples=60, deadline=None)
@given(
    z=st.integers(-40, 40),
    codes=st.lists(st.integers(0, 255), min_size=0, max_size=65),
    offset=st.integers(0, 1),
    step=st.integers(1, 2),
)
def test_every_layout_gives_the_level_tables_bits(z, codes, offset, step):
    base = np.array([0, *codes], np.uint8)
    view = base[offset::step]  # even and odd sizes, unaligned and strided codes
    got = dequantize_z(view, z)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), _plain(view, z).view(np.uint32))


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 1), (0,), ()])
def test_shapes_and_all_codes(shape):
    codes = np.arange(256, dtype=np.uint8)
    assert np.array_equal(dequantize_z(codes, 3).view(np.uint32), _plain(codes, 3).view(np.uint32))
    block = np.resize(codes, shape) if shape != () else np.uint8(200)
    out = dequantize_z(block, -7)
    assert out.shape == np.shape(block)
    assert np.array_equal(np.asarray(out).view(np.uint32),
                          _plain(np.asarray(block), -7).view(np.uint32))  # fmt: skip
