"""int8 SOFTMAX: the vectorized kernel == the scalar twin row by row (hypothesis), and == the
live peers' outputs recorded in activation_peer_vectors.json, including rows where the
fixed-point reference kernels and LiteRT's float32 optimized kernel differ."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.backends.tflite import activation_params as P
from quantemu.backends.tflite import activation_reference as R
from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.tflite.softmax import softmax_int8
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.backends.tflite.strategies import codes, scales

VECTORS = json.loads((Path(__file__).parent / "activation_peer_vectors.json").read_text())
SOFTMAX = [c for c in VECTORS["cases"] if c["op"] == "softmax"]
BETAS = st.sampled_from([1.0, 0.25, 0.5, 2.0, 3.7, 10.0])


def _codes(hexes: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(hexes), dtype=np.int8).reshape(1, -1)


@given(
    codes((2, 5, 3, 4)),
    scales(2.0**-9, 2.0**2),
    BETAS,
    st.sampled_from([0, 1, 3, -1]),
    st.booleans(),
)
def test_softmax_twin(x, s_in, beta, axis, optimized):
    p = P.softmax_params(s_in, beta, litert_optimized=optimized)
    y, counters = softmax_int8(x, p, axis=axis)
    assert y.dtype == np.int8 and y.shape == x.shape
    rows = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    expected = np.array([R.softmax_row(r, p) for r in rows])
    assert np.moveaxis(y, axis, -1).reshape(-1, x.shape[axis]).tolist() == expected.tolist()
    assert counters["sum_wrapped"] == 0 and counters["shift_over_31"] == 0


@pytest.mark.parametrize("case", SOFTMAX, ids=lambda c: f"{c['s_in']:.4g}-{c['beta']}")
def test_peer_vectors(case):
    x = _codes(case["input"])
    for runtime in TfliteRuntime:
        got = softmax_int8(x, P.softmax_params(case["s_in"], case["beta"], runtime=runtime))[0]
        assert got.tolist() == _codes(case[runtime.value]).tolist()
    p = P.softmax_params(case["s_in"], case["beta"], litert_optimized=True)
    assert softmax_int8(x, p)[0].tolist() == _codes(case["litert_optimized"]).tolist()


def test_nchw_channel_axis():
    """TFLite's last NHWC axis is NCHW's axis 1: the same rows, transposed."""
    x = np.random.default_rng(0).integers(-128, 128, (2, 6, 3, 4), dtype=np.int8)
    p = P.softmax_params(0.05)
    nchw = softmax_int8(x, p, axis=1)[0]
    nhwc = softmax_int8(np.transpose(x, (0, 2, 3, 1)), p, axis=-1)[0]
    assert np.array_equal(np.transpose(nhwc, (0, 3, 1, 2)), nchw)


def test_counters_and_limits():
    p = P.softmax_params(0.5, 4.0)  # diff_min small: far-below entries flush to -128
    y, c = softmax_int8(np.array([[127, 0, -128]], dtype=np.int8), p)
    assert y.tolist() == [[127, -128, -128]] and c["flushed_to_zero"] == 2
    # 600 equal maxima: the exp sum is 600 in Q12.19, so gemmlowp's final shift is 33 > 31
    # (both peers abort on that assert); the counter says so.
    y, c = softmax_int8(np.zeros((1, 600), dtype=np.int8), P.softmax_params(0.05))
    assert c["shift_over_31"] == 1 and c["sum_wrapped"] == 0
    y, c = softmax_int8(np.zeros((1, 5000), dtype=np.int8), P.softmax_params(0.05))
    assert c["sum_wrapped"] == 1


def test_errors():
    with pytest.raises(UnsupportedError, match="1/256"):
        P.softmax_params(0.1, s_out=1 / 128)
    with pytest.raises(UnsupportedError, match="1/256"):
        P.softmax_params(0.1, s_out=1 / 256 * 1.0005, runtime="tflite_micro")
    P.softmax_params(0.1, s_out=1 / 256 * 1.0005)  # LiteRT: within 0.1%
    with pytest.raises(UnsupportedError, match="<= 1"):
        P.softmax_params(2.0**-30)
    with pytest.raises(InvalidInputError, match="axis 4"):
        softmax_int8(np.zeros((1, 2), np.int8), P.softmax_params(0.1), axis=4)
