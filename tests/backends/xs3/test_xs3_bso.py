"""BSO packing and decoding: layout, the unsigned bias_lo, tails, round trip."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from xs3_strategies import biases, int16_values, shifts

from quantemu.backends.xs3 import pack_bso, unpack_bso


def test_layout_by_hand():
    # Channel 17 lives in group 1, column 1. bias -1 = 0xFFFFFFFF: hi = -1 (0xFFFF signed),
    # lo = 0xFFFF stored as int16 -1. bias 0x12348000: hi 0x1234 = 4660, lo 0x8000 = -32768
    # as int16. bias -2^31: hi -32768, lo 0.
    c = 18
    bias = np.zeros(c, dtype=np.int64)
    bias[[0, 1, 17]] = [-1, 0x12348000, -(2**31)]
    bso = pack_bso(bias, shift1=np.arange(c) % 32, scale=7, offset_scale=-8, offset=9, shift2=31)
    assert bso.shape == (2, 7, 16) and bso.dtype == np.int16
    assert bso[0, :, 0].tolist() == [-1, -1, 0, 7, -8, 9, 31]
    assert bso[0, :, 1].tolist() == [4660, -32768, 1, 7, -8, 9, 31]
    assert bso[1, :, 1].tolist() == [-32768, 0, 17, 7, -8, 9, 31]
    assert not bso[1, :, 2:].any()  # tail slots are zero
    ch = unpack_bso(bso, c)
    assert ch.bias[[0, 1, 17]].tolist() == [-1, 0x12348000, -(2**31)]


def test_tails_are_ignored_on_unpack():
    bso = pack_bso(np.array([5, 6, 7, 8]), shift1=1, scale=2, offset_scale=3, offset=4, shift2=5)
    junk = bso.copy()
    junk[0, :, 4:] = np.arange(7 * 12).reshape(7, 12) - 40
    a, b = unpack_bso(bso, 4), unpack_bso(junk, 4)
    for name, value in a.fields().items():
        assert value.tolist() == b.fields()[name].tolist()


@settings(max_examples=60, deadline=None)
@given(data=st.data(), c=st.integers(1, 40))
def test_round_trip(data, c):
    def column(values):
        return np.array(data.draw(st.lists(values, min_size=c, max_size=c)), dtype=np.int64)

    fields = {
        "bias": column(biases),
        "shift1": column(shifts),
        "scale": column(int16_values),
        "offset_scale": column(int16_values),
        "offset": column(int16_values),
        "shift2": column(shifts),
    }
    bso = pack_bso(**fields)
    assert bso.shape == (-(-c // 16), 7, 16)
    back = unpack_bso(bso, c)
    assert back.channels == c
    for name, value in fields.items():
        assert back.fields()[name].tolist() == value.tolist(), name
    # Packing the decoded fields again gives the same words.
    assert np.array_equal(pack_bso(**back.fields()), bso)
