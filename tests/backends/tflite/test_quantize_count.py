"""``TfliteInt8Encoding.quantize_count``'s one-buffer rounding equals the definition: TFLite's
round half away from zero (``float64_round_half_away_add_truncate``), the zero point, the int8
clamp, and the count of clamped values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.tflite.quantize import int8_encoding
from quantemu.intmath.floatconv import float64_round_half_away_add_truncate


def _definition(values, enc):
    v = np.asarray(values, dtype=np.float32) / np.float32(enc.scale)
    codes = float64_round_half_away_add_truncate(v) + int(enc.zero_point)
    clipped = np.clip(codes, -128, 127)
    return clipped.astype(np.int8), int(np.count_nonzero(clipped != codes))


SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 127.5, -128.5, 0.49999997, np.inf, -np.inf,
           1e30, -1e30, np.float32(2**24) + 1]  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    scale=st.floats(1e-5, 10.0),
    zero_point=st.integers(-128, 127),
    values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=0, max_size=50),
    ties=st.booleans(),
)
def test_equals_the_definition(scale, zero_point, values, ties):
    enc = int8_encoding(scale, zero_point)
    x = np.array(values + SPECIAL, np.float32)
    if ties:  # values that land on .5 after the division
        x = np.concatenate([x, (np.arange(-300, 300) + 0.5).astype(np.float32) * np.float32(scale)])
    got_codes, got_count = enc.quantize_count(x)
    want_codes, want_count = _definition(x, enc)
    assert np.array_equal(got_codes, want_codes)
    assert got_count == want_count


def test_a_scalar_quantizes_like_an_array():
    enc = int8_encoding(0.1, 3)
    codes, count = enc.quantize_count(np.float32(-20.0))
    assert int(codes) == -128 and count == 1
    assert np.array_equal(np.asarray(codes), _definition(np.float32(-20.0), enc)[0])
