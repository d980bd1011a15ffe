"""The fused output stage equals the step-by-step one (the specification), integer for integer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.tflite.output import requantize_clamp
from quantemu.backends.tflite.params import MultiplierRounding
from quantemu.errors import QuantemuError


@st.composite
def stages(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.integers(1, 5))
    mag = draw(st.sampled_from([2**8, 2**20, 2**27, 2**31 - 1]))
    acc = rng.integers(-mag, mag, (draw(st.integers(1, 40)), c), endpoint=True)
    lo_s, hi_s = sorted(draw(st.lists(st.integers(-31, 31), min_size=2, max_size=2)))
    s = rng.integers(lo_s, hi_s, c, endpoint=True)
    m = rng.integers(0, 2**31 - 1, c, endpoint=True)
    m[rng.random(c) < 0.3] = 1 << 30  # exact powers of two make ties
    bias = rng.integers(-(2**31), 2**31 - 1, c) >> draw(st.integers(0, 31))
    lo, hi = sorted(draw(st.lists(st.integers(-128, 127), min_size=2, max_size=2)))
    return acc, m, s, bias, draw(st.integers(-128, 127)), lo, hi


@settings(max_examples=300, deadline=None)
@given(stages(), st.sampled_from(list(MultiplierRounding)), st.booleans())
def test_fused_equals_step_by_step(stage, rounding, with_bias):
    acc, m, s, bias, offset, lo, hi = stage
    bias = bias if with_bias else None
    kw = {"act_min": lo, "act_max": hi, "rounding": rounding}
    try:  # the specification: a list input takes the step-by-step path
        want = requantize_clamp(acc.tolist(), m, s, offset, bias=bias, **kw)
    except QuantemuError as e:  # the fused stage must raise the same kind
        try:
            requantize_clamp(acc, m, s, offset, bias=bias, **kw)
        except type(e):
            return
        raise AssertionError(f"the fused stage did not raise {e!r}") from None
    got = requantize_clamp(acc, m, s, offset, bias=bias, **kw)
    assert got[1] == want[1]
    assert got[0].dtype == np.int8
    assert got[0].tolist() == np.asarray(want[0]).tolist()
