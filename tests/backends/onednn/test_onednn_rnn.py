"""oneDNN's int8 LSTM/GRU: the vectorised operators against the scalar references (``==`` on
bit patterns), the JIT activations on boundary-biased inputs, the oneDNN 3.2.0 vectors, and the
errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn import Isa, RnnDirection, RnnParams, gru, lstm
from quantemu.backends.onednn import reference_rnn as ref
from quantemu.backends.onednn.eltwise_jit import (
    EXP_LN_FLT_MAX,
    EXP_LN_FLT_MIN,
    TANH_LINEAR_UBOUND,
    TANH_SATURATION_LBOUND,
    exp_jit_f32,
    logistic_jit_f32,
    tanh_jit_f32,
)
from quantemu.backends.onednn.rnn_params import RnnCell
from quantemu.conformance import collect_files, run_suite
from quantemu.errors import InvalidInputError, UnsupportedError

VECTORS = Path(__file__).resolve().parents[2] / "data" / "onednn_rnn"
F = np.float32
BOUNDARIES = [0.0, 2.0**-12, 2.0**-11, 1.0, 8.0, 9.0]
BOUNDARIES += [float(v) for v in (TANH_LINEAR_UBOUND, TANH_SATURATION_LBOUND)]
BOUNDARIES += [float(v) for v in (EXP_LN_FLT_MAX, EXP_LN_FLT_MIN)]


def _near(v: float) -> list[float]:
    f = F(v)
    return [float(f), float(np.nextafter(f, F(np.inf))), float(np.nextafter(f, F(-np.inf)))]


FLOATS = st.one_of(
    st.floats(-100, 100, width=32),
    st.sampled_from([w for v in BOUNDARIES for s in (1, -1) for w in _near(s * v)]),
    st.floats(width=32, allow_nan=False),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=16))
def test_jit_activations_match_their_scalar_references(xs):
    x = np.array(xs, dtype=F)
    for vector, scalar in (
        (exp_jit_f32, ref.exp_jit),
        (logistic_jit_f32, ref.logistic_jit),
        (tanh_jit_f32, ref.tanh_jit),
    ):
        want = np.array([scalar(v) for v in x], dtype=F)
        assert vector(x).view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_jit_activations_differ_from_libm_where_oneDNN_does():
    """exp underflows to 0 below ln(FLT_MIN) (libm gives subnormals); on [-5, 5] about a third
    of tanh's and half of logistic's values differ from NumPy's in the last bits."""
    assert exp_jit_f32(np.array([-100.0], F))[0] == 0 < np.exp(F(-100))
    x = np.linspace(-5, 5, 2001, dtype=F)
    assert np.count_nonzero(tanh_jit_f32(x) != np.tanh(x)) > 500
    assert np.count_nonzero(logistic_jit_f32(x) != F(1) / (F(1) + np.exp(-x))) > 500


@st.composite
def rnn_cases(draw):
    cell = draw(st.sampled_from([RnnCell.LSTM, RnnCell.GRU]))
    direction = draw(st.sampled_from(list(RnnDirection)))
    isa = draw(st.sampled_from([Isa.AVX2, Isa.AVX512_CORE_VNNI]))
    t, n, c = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 3]))
    layers = draw(st.integers(1, 2))
    slc = c if layers > 1 else draw(st.integers(1, 4))
    d, g = direction.directions, cell.gates
    mask = draw(st.sampled_from([0, 24]))
    scale, shift = draw(st.sampled_from([(127.0, 128.0), (63.5, 64.0), (2.0, 0.0), (100.0, 7.5)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w_range = draw(st.sampled_from([63, 127]))
    arrays = {
        "x": rng.integers(0, 256, (t, n, slc), dtype=np.uint8),
        "h0": rng.integers(0, 256, (layers, d, n, c), dtype=np.uint8),
        "c0": rng.standard_normal((layers, d, n, c)).astype(F),
        "wl": rng.integers(-w_range, w_range + 1, (layers, d, slc, g, c)).astype(np.int8),
        "wi": rng.integers(-w_range, w_range + 1, (layers, d, c, g, c)).astype(np.int8),
        "ws": (2.0 ** rng.integers(2, 9, size=1 if mask == 0 else g * c)).astype(F),
        "bias": (rng.standard_normal((layers, d, g, c)) * 2).astype(F),
    }
    params = RnnParams(isa, direction, scale, shift, mask)
    return cell, params, arrays


def _run(cell, params, a):
    if cell is RnnCell.LSTM:
        return lstm(a["x"], a["wl"], a["wi"], a["ws"], params, bias=a["bias"], src_iter=a["h0"],
                    src_iter_c=a["c0"])  # fmt: skip
    return gru(a["x"], a["wl"], a["wi"], a["ws"], params, bias=a["bias"], src_iter=a["h0"])


@settings(max_examples=60, deadline=None)
@given(rnn_cases())
def test_rnn_matches_the_scalar_reference(case):
    cell, params, a = case
    got = _run(cell, params, a)
    x = a["x"].tolist()
    tensors = (a["wl"], a["wi"], a["ws"], a["bias"])
    dst, dst_iter, dst_c = ref.rnn(cell, params, x, (a["h0"].tolist(), a["c0"]), tensors)
    assert got.dst_layer.tolist() == dst
    assert got.dst_iter.tolist() == dst_iter
    if cell is RnnCell.LSTM:
        want_c = np.array(dst_c, dtype=F)
        assert got.dst_iter_c.view(np.uint32).tolist() == want_c.view(np.uint32).tolist()


def test_pair_saturation_is_counted_without_vnni_only():
    rng = np.random.default_rng(0)
    x = np.full((2, 1, 8), 255, np.uint8)
    w = np.full((1, 1, 8, 4, 8), 127, np.int8)
    ws = np.ones(32, F)
    for isa, expect in ((Isa.AVX2, True), (Isa.AVX512_CORE_VNNI, False)):
        result = lstm(
            x, w, w, ws, RnnParams(isa), src_iter=rng.integers(0, 256, (1, 1, 1, 8), dtype=np.uint8)
        )
        assert (result.saturated_pairs > 0) is expect
    assert result.saturated_states == 0


def test_the_oneDNN_vectors_pass():
    totals = run_suite(collect_files([VECTORS])).totals()
    assert totals.total == 96 and totals.passed == 96


def test_absent_states_start_from_the_quantized_zero():
    x = np.zeros((1, 1, 2), np.uint8)
    w = np.zeros((1, 1, 2, 3, 2), np.int8)
    params = RnnParams(Isa.AVX2, data_scale=10.0, data_shift=2.5)
    default = gru(x, w, w, np.ones(1, F), params.__class__(Isa.AVX2, data_scale=10.0,
                  data_shift=2.5, weights_scales_mask=0))  # fmt: skip
    explicit = gru(
        x,
        w,
        w,
        np.ones(1, F),
        RnnParams(Isa.AVX2, RnnDirection.L2R, 10.0, 2.5, 0),
        src_iter=np.full((1, 1, 1, 2), 2, np.uint8),
    )  # fmt: skip  rne(2.5) = 2
    assert default.dst_layer.tolist() == explicit.dst_layer.tolist()
    assert params.weights_scales_mask == 24


def _lstm_args(**changes):
    args = {
        "src_layer": np.zeros((2, 1, 4), np.uint8),
        "weights_layer": np.zeros((1, 1, 4, 4, 3), np.int8),
        "weights_iter": np.zeros((1, 1, 3, 4, 3), np.int8),
        "weights_scales": np.ones(12, F),
        "params": RnnParams(Isa.AVX2),
    }
    args.update(changes)
    return args


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"src_layer": np.zeros((2, 1, 4), np.int8)}, "src_layer must be a 3-D uint8 array"),
        ({"src_layer": np.zeros((2, 1, 5), np.uint8)}, "needs SLC = 4"),
        ({"weights_iter": np.zeros((1, 1, 4, 4, 3), np.int8)}, "expected (L, D, DHC, G, DHC)"),
        ({"weights_layer": np.zeros((1, 1, 4, 3, 3), np.int8)}, "G = 4"),
        ({"weights_scales": np.ones(4, F)}, "mask 24"),
        ({"weights_scales": np.array([1.0] * 11 + [0.0], F)}, "finite and positive"),
        ({"params": RnnParams(Isa.AVX2, RnnDirection.CONCAT)}, "D = 2"),
        ({"bias": np.zeros((1, 1, 4, 2), F)}, "bias has shape"),
        ({"src_iter": np.zeros((1, 1, 2, 3), np.uint8)}, "src_iter has shape"),
        (
            {
                "weights_layer": np.zeros((2, 1, 4, 4, 3), np.int8),
                "weights_iter": np.zeros((2, 1, 3, 4, 3), np.int8),
            },
            "needs SLC = DHC",
        ),
    ],
)
def test_bad_inputs_name_the_tensor(changes, message):
    args = _lstm_args(**changes)
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        lstm(args.pop("src_layer"), args.pop("weights_layer"), args.pop("weights_iter"),
             args.pop("weights_scales"), args.pop("params"), **args)  # fmt: skip


def test_bad_parameters_and_lbr_gru_are_refused():
    with pytest.raises(InvalidInputError, match="not a binary32"):
        RnnParams(Isa.AVX2, data_scale=0.1)
    with pytest.raises(InvalidInputError, match="not one of"):
        RnnParams("sse41")
    with pytest.raises(UnsupportedError, match="weights_scales_mask = 8"):
        RnnParams(Isa.AVX2, weights_scales_mask=8)
    x = np.zeros((1, 1, 2), np.uint8)
    w = np.zeros((1, 1, 2, 3, 2), np.int8)
    with pytest.raises(UnsupportedError, match="dnnl_unimplemented"):
        gru(x, w, w, np.ones(6, F), RnnParams(Isa.AVX2), linear_before_reset=True)


@st.composite
def fma_operands(draw):
    """Operands whose exact product often sits on (or next to) a binary32 tie: 13-bit
    integers scaled by powers of two, and addends from zero to far below the product."""
    i, j = draw(st.integers(2**12, 2**13 - 1)), draw(st.integers(2**12, 2**13 - 1))
    ea, eb = draw(st.integers(-80, 40)), draw(st.integers(-80, 40))
    a, b = F(i * 2.0**ea) * draw(st.sampled_from([1, -1])), F(j * 2.0**eb)
    tiny = st.builds(lambda k, e: k * 2.0**e, st.integers(-3, 3), st.integers(-160, 60))
    c = draw(st.one_of(st.just(0.0), st.floats(-(2.0**100), 2.0**100, width=32), tiny))
    return a, b, F(c)


@settings(max_examples=600, deadline=None)
@given(st.lists(fma_operands(), min_size=1, max_size=8))
def test_fma_f32_is_correctly_rounded_near_ties(operands):
    from quantemu.backends.onednn.aten import fma_f32
    from quantemu.backends.onednn.reference import fma32

    a, b, c = (np.array(v, dtype=F) for v in zip(*operands, strict=True))
    want = np.array([fma32(*t) for t in operands], dtype=F)
    assert fma_f32(a, b, c).view(np.uint32).tolist() == want.view(np.uint32).tolist()
