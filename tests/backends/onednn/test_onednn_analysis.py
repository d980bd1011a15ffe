"""Family prediction (page §5.3, heuristic), overflow-risk analysis and the RNN helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn import (
    ConvGeometry,
    ConvImpl,
    MatmulParams,
    QuantizedImpl,
    RnnDataQParams,
    conv_overflow_risk,
    dequantize_rnn_data,
    linear_overflow_risk,
    matmul,
    predict_conv_impl,
    predict_quantized_linear_impl,
    quantize_rnn_data,
    quantize_rnn_weights,
    rnn_weights_scales,
)
from quantemu.conformance import bundled_files, read_cases


def _vector_cases(op: str):
    files = [f for f in bundled_files() if f.display.endswith(f"/onednn/{op}.jsonl.gz")]
    return list(read_cases(files))


@pytest.mark.parametrize(
    ("isa", "src", "x", "w", "geo", "want"),
    [
        # avx2: direct, grouped non-depthwise with C/groups or O/groups not a multiple of 4: ref
        ("avx2", "u8", (1, 4, 5, 5), (4, 2, 3, 3), {"groups": 2}, ConvImpl.REF),
        ("avx2", "u8", (1, 8, 5, 5), (8, 4, 3, 3), {"groups": 2}, ConvImpl.DIRECT),
        ("avx2", "u8", (1, 4, 5, 5), (4, 1, 3, 3), {"groups": 4}, ConvImpl.DIRECT),  # depthwise
        # AVX-512, one input channel per group (VBMI host): kernel relocation
        ("avx512_core", "u8", (1, 2, 5, 8), (4, 1, 3, 3), {"groups": 2}, ConvImpl.RELO_WH),
        ("avx512_core", "u8", (1, 2, 5, 5), (4, 1, 2, 3), {"groups": 2}, ConvImpl.RELO_W),  # OW=3
        (
            "avx512_core",
            "s8",
            (1, 2, 5, 8),
            (4, 1, 3, 3),
            {"groups": 2, "pads": (1, 0, 0, 0)},
            ConvImpl.RELO_W,
        ),
        (
            "avx512_core",
            "u8",
            (1, 2, 9, 9),
            (4, 1, 3, 3),
            {"groups": 2, "dilations": (2, 2)},
            ConvImpl.DIRECT,
        ),
        ("avx512_core", "u8", (1, 4, 5, 8), (4, 1, 3, 3), {"groups": 4}, ConvImpl.DIRECT),  # dw
        ("avx512_core_vnni", "u8", (1, 4, 5, 8), (4, 2, 3, 3), {"groups": 2}, ConvImpl.DIRECT),
    ],
)
def test_predict_conv_impl_rules(isa, src, x, w, geo, want):  # noqa: PLR0917
    assert predict_conv_impl(isa, src, x, w, ConvGeometry(**geo)) is want


def test_predict_conv_impl_without_vbmi_is_direct():
    g = ConvGeometry(groups=2)
    assert predict_conv_impl("avx512_core", "u8", (1, 2, 5, 8), (4, 1, 3, 3), g) is ConvImpl.RELO_WH
    pred = predict_conv_impl(
        "avx512_core", "u8", (1, 2, 5, 8), (4, 1, 3, 3), g, host_has_vbmi=False
    )
    assert pred is ConvImpl.DIRECT


def test_predict_conv_impl_agrees_with_the_vectors_except_performance_picks():
    """The vectors' families, bar the performance-heuristic ones the page does not specify."""
    misses = []
    for case in _vector_cases("conv2d"):
        a = case.attrs
        geo = ConvGeometry(a["strides"], a["pads"], a["dilations"], a["groups"])
        pred = predict_conv_impl(
            a["isa"], a["src_dt"], case.inputs["x"].shape, case.inputs["w"].shape, geo
        )
        if pred.value != a["impl"]:
            misses.append(case.note.rsplit("impl=", 1)[1])
    # gemm-based convolution and the older jit_int8 kernels are chosen on performance grounds
    assert all(m.startswith(("x64:gemm", "jit_int8")) for m in misses), misses
    assert len(misses) <= 3


def test_predict_quantized_linear_impl_matches_the_vectors():
    for case in _vector_cases("quantized_linear"):
        assert predict_quantized_linear_impl(case.attrs["isa"]).value == case.attrs["impl"]
    assert predict_quantized_linear_impl("avx2") is QuantizedImpl.JIT_UNI


def test_linear_risk_seed_example():
    w = np.array([[127, 127, 0, 0], [64, 64, 64, 64], [127, -127, 127, 5]], dtype=np.int8)
    r = linear_overflow_risk(w, "avx2")
    assert r.can_saturate
    assert r.channels.tolist() == [0, 2]
    assert r.pairs.tolist() == [[0, 0, 1], [2, 2, 3]]
    # 255·127·2 − 32767 = 64770 − 32767 = 32003; channel 1: 255·64·2 = 32640 fits;
    # channel 2: (127, −127) has mixed signs, (127, 5): 255·132 − 32767 = 893
    assert r.max_error.tolist() == [32003, 0, 893]
    remedies = {rem.name: rem.removes_risk for rem in r.remedies}
    assert remedies == {
        "u7 activations": True,
        "s7 weights": True,
        "reduce_range": True,
        "VNNI/AMX": True,
    }
    # the error is attained: x = 255 everywhere gives exactly max_error below the exact value
    x = np.full((1, 4), 255, dtype=np.uint8)
    sat = matmul(x, w.T.copy(), MatmulParams("avx2", "u8")).acc
    exact = matmul(x, w.T.copy(), MatmulParams("avx2_vnni", "u8")).acc
    assert (exact - sat).tolist() == [[32003, 0, 893]]


def test_linear_risk_vnni_and_u7_are_safe():
    w = np.full((2, 6), 127, dtype=np.int8)
    assert not linear_overflow_risk(w, "avx512_core_vnni").can_saturate
    assert not linear_overflow_risk(w, "avx2", activation_range=(0, 127)).can_saturate
    # 129·254 = 32766 still fits; 130·254 = 33020 does not
    assert not linear_overflow_risk(w, "avx2", activation_range=(0, 129)).can_saturate
    assert linear_overflow_risk(w, "avx2", activation_range=(0, 130)).can_saturate


def test_linear_risk_s8_source_goes_through_plus_128():
    w = np.full((1, 2), 127, dtype=np.int8)
    r = linear_overflow_risk(w, "avx2", src_dt="s8")
    assert r.activation_range == (0, 255)
    assert r.can_saturate
    remedies = {rem.name: rem.removes_risk for rem in r.remedies}
    assert not remedies["u7 activations"] and remedies["s7 weights"]
    # only [-128, -1] would help (seed 002's warning)
    assert not linear_overflow_risk(
        w, "avx2", src_dt="s8", activation_range=(-128, -1)
    ).can_saturate


def test_conv_risk_depends_on_pairing_order():
    # C/groups = 1: direct pairs each tap with a zero (never saturates); relo_w pairs the taps
    w = np.full((2, 1, 1, 2), 127, dtype=np.int8)
    assert not conv_overflow_risk(w, "avx512_core", "direct").can_saturate
    r = conv_overflow_risk(w, "avx512_core", "relo_w")
    assert r.pairs.tolist() == [[0, 0, 1], [1, 0, 1]]
    assert not conv_overflow_risk(w, "avx512_core", "ref").can_saturate


def test_conv_risk_s8_source_halves_instead():
    w = np.full((1, 2, 1, 1), 127, dtype=np.int8)
    r = conv_overflow_risk(w, "avx2", src_dt="s8")
    assert not r.can_saturate
    assert "rne(w/2)" in r.notes[0]


@settings(max_examples=60)
@given(
    w=st.lists(st.integers(-128, 127), min_size=6, max_size=6),
    x=st.lists(
        st.sampled_from([0, 1, 128, 254, 255]) | st.integers(0, 255), min_size=6, max_size=6
    ),
)
def test_linear_risk_bounds_the_real_error(w, x):
    wa = np.array([w], dtype=np.int8)
    r = linear_overflow_risk(wa, "avx2")
    xa = np.array([x], dtype=np.uint8)
    sat = matmul(xa, wa.T.copy(), MatmulParams("avx2", "u8")).acc
    exact = matmul(xa, wa.T.copy(), MatmulParams("avx512_core_vnni", "u8")).acc
    assert abs(int(sat[0, 0]) - int(exact[0, 0])) <= int(r.max_error[0])
    if sat[0, 0] != exact[0, 0]:
        assert r.can_saturate


def test_rnn_recommended_parameters():
    qp = RnnDataQParams()
    assert (qp.scale, qp.shift) == (127.0, 128.0)
    w = np.array([[0.5, -2.0, 0.25], [1.0, 0.1, -0.3]], dtype=np.float32)
    s = rnn_weights_scales(w)
    assert float(s) == np.float32(63) / np.float32(2)
    q = quantize_rnn_weights(w, s)
    assert q.dtype == np.int8 and np.abs(q).max() == 63
    # per output channel: 63/0 -> error; 63/2, 63/1
    sc = rnn_weights_scales(w, per_output_channel=True)
    assert sc.tolist() == [31.5, 63.0]
    assert np.abs(quantize_rnn_weights(w, sc[:, None])).max() <= 63
    # s7 weights cannot saturate VPMADDUBSW with any u8 data
    assert not linear_overflow_risk(q, "avx2").can_saturate


def test_rnn_data_round_trip():
    x = np.array([-1.0, -0.5, 0.0, 0.25, 1.0], dtype=np.float32)
    q = quantize_rnn_data(x)
    # x·127 + 128: 1, 64.5 -> 64 (even), 128, 159.75 -> 160, 255
    assert q.tolist() == [1, 64, 128, 160, 255]
    back = dequantize_rnn_data(q)
    assert np.all(np.abs(back - x) <= np.float32(0.5 / 127) + np.float32(1e-7))
