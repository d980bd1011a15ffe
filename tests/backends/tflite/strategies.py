"""Hypothesis strategies for the TFLite kernels: int8 code arrays biased to the rails and to 0,
float32 scales over several octaves, int8 zero points, fused activations."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from quantemu.backends.tflite.params import FusedActivation
from tests.strategies import signed_ints

EDGE_CODES = np.array([-128, -127, -1, 0, 1, 126, 127], np.int8)


@st.composite
def codes(draw, shape) -> np.ndarray:
    """int8 codes of ``shape``: uniform, or half of them from the edges."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    if draw(st.booleans()):
        mask = rng.random(shape) < 0.5
        x[mask] = rng.choice(EDGE_CODES, int(mask.sum()))
    return x


def scales(lo: float = 2.0**-12, hi: float = 2.0**-1) -> st.SearchStrategy[float]:
    """A float32 scale, log-uniform in ``[lo, hi]`` (exact powers of two now and then)."""
    exps = st.floats(np.log2(lo), np.log2(hi), allow_nan=False)
    powers = st.integers(int(np.log2(lo)), int(np.log2(hi))).map(lambda e: 2.0**e)
    return st.one_of(powers, exps.map(lambda e: float(np.float32(2.0**e))))


zero_points = signed_ints(8)
activations = st.sampled_from(list(FusedActivation))
