"""Hand-derived goldens: seed 002's worked examples and the conformance page's examples.

Every expected value is worked out in the comment beside it from the page's formulas.
"""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends.onednn import (
    AvgPool2dParams,
    Conv2dParams,
    ConvGeometry,
    Isa,
    MatmulParams,
    QuantizedLinearParams,
    ReorderParams,
    Requantization,
    avg_pool2d,
    conv2d,
    matmul,
    quantized_linear,
    reorder,
    rne_half,
)
from quantemu.backends.onednn.f32 import rr

NON_VNNI = ["avx2", "avx512_core"]
EXACT = ["avx2_vnni", "avx512_core_vnni", "avx512_core_amx"]


def _mm(a, b, isa, src_dt, *, api="matmul", zp=0):
    dtype = np.uint8 if src_dt == "u8" else np.int8
    a = np.array(a, dtype=dtype)
    b = np.array(b, dtype=np.int8)
    return matmul(a, b, MatmulParams(isa, src_dt, api, zp)).acc.tolist()


@pytest.mark.parametrize("isa", NON_VNNI)
def test_seed_u8s8_saturates_to_32767(isa):
    # sat16(255·127 + 255·127) + sat16(0·0 + 0·0) = sat16(64770) = 32767
    assert _mm([[255, 255, 0, 0]], [[127], [127], [0], [0]], isa, "u8") == [[32767]]


@pytest.mark.parametrize("isa", EXACT)
def test_seed_u8s8_exact_on_vnni(isa):
    # 255·127 + 255·127 = 64770
    assert _mm([[255, 255, 0, 0]], [[127], [127], [0], [0]], isa, "u8") == [[64770]]


@pytest.mark.parametrize("isa", NON_VNNI)
@pytest.mark.parametrize("api", ["matmul", "gemm"])
def test_seed_s8s8_gives_255(isa, api):
    # (a + 128) = [255, 255, 128, 128]: sat16(255·127·2) + sat16(128·0 + 128·0) − 128·254
    # = 32767 − 32512 = 255 (expected 32258)
    assert _mm([[127, 127, 0, 0]], [[127], [127], [0], [0]], isa, "s8", api=api) == [[255]]


@pytest.mark.parametrize("isa", EXACT)
def test_seed_s8s8_exact_on_vnni(isa):
    # 127·127·2 = 32258
    assert _mm([[127, 127, 0, 0]], [[127], [127], [0], [0]], isa, "s8") == [[32258]]


def test_odd_k_pairs_last_element_with_zero():
    # K = 3: pairs (k0, k1) and (k2, 0): sat16(64770) + 255·127 = 32767 + 32385 = 65152
    assert _mm([[255, 255, 255]], [[127], [127], [127]], "avx2", "u8") == [[65152]]


def test_u8_zero_point_is_an_exact_s32_correction():
    # pair_sum(a, b) − zp·Σb = 32767 − 10·254 = 30227 (the zero point does not enter the pairs)
    assert _mm([[255, 255]], [[127], [127]], "avx2", "u8", zp=10) == [[30227]]


def test_avx2_matmul_s8_with_zero_point_is_exact():
    # Irregularity 1: Σ (a − zp)·b = 126·127·2 = 32004 on avx2 ...
    assert _mm([[127, 127]], [[127], [127]], "avx2", "s8", zp=1) == [[32004]]
    # ... while avx512_core saturates: sat16(255·127·2) − (128 + 1)·254 = 32767 − 32766 = 1
    assert _mm([[127, 127]], [[127], [127]], "avx512_core", "s8", zp=1) == [[1]]


def test_gemm_avx512_core_matrix_vector_shifts_b():
    a = [[-128, -128]]
    # Irregularity 2, N = 1 on avx512_core: (B + 128) = [255, 255] paired with A:
    # sat16(255·(−128)·2 = −65280) = −32768, compensation −128·ΣA = +32768 -> 0
    assert _mm(a, [[127], [127]], "avx512_core", "s8", api="gemm") == [[0]]
    # avx2 (and N > 1) shift A: (A + 128) = [0, 0] -> 0 − 128·254 = −32512, the exact value
    assert _mm(a, [[127], [127]], "avx2", "s8", api="gemm") == [[-32512]]
    assert _mm(a, [[127, 127], [127, 127]], "avx512_core", "s8", api="gemm") == [[-32512, -32512]]


def test_halving_table():
    w = np.array([-128, -127, -3, -1, 1, 3, 5, 127], dtype=np.int8)
    assert rne_half(w).tolist() == [-64, -64, -2, 0, 0, 2, 2, 64]


@pytest.mark.parametrize(("weight", "non_vnni", "exact"), [(1, 0, 400), (3, 1600, 1200)])
@pytest.mark.parametrize("isa", ["avx2", "avx512_core", "avx512_core_vnni"])
def test_conv_demo_s8_halving(weight, non_vnni, exact, isa):
    # x = 100, C = 4, 1x1, s8 source: non-VNNI 2·Σ x·rne(w/2): w = 1 -> 2·4·100·0 = 0,
    # w = 3 -> 2·4·100·2 = 1600; exact 4·100·w = 400 / 1200
    x = np.full((1, 4, 1, 1), 100, dtype=np.int8)
    w = np.full((1, 4, 1, 1), weight, dtype=np.int8)
    y = conv2d(x, w, Conv2dParams(isa, "s8", "direct")).acc
    assert y.tolist() == [[[[non_vnni if isa in NON_VNNI else exact]]]]


def test_conv_ref_is_exact_without_halving():
    x = np.full((1, 4, 1, 1), 100, dtype=np.int8)
    w = np.full((1, 4, 1, 1), 3, dtype=np.int8)
    assert conv2d(x, w, Conv2dParams("avx2", "s8", "ref")).acc.item() == 1200


def test_direct_pairs_channels_inside_a_tap_only():
    # C = 1, 1x2 kernel, x = 255, w = 127. direct: one segment per tap, (c0, 0) each:
    # 32385 + 32385 = 64770. relo_w / gemm: one segment (tap0, tap1): sat16(64770) = 32767.
    x = np.full((1, 1, 1, 2), 255, dtype=np.uint8)
    w = np.full((1, 1, 1, 2), 127, dtype=np.int8)
    for impl, want in [("direct", 64770), ("relo_w", 32767), ("gemm", 32767), ("ref", 64770)]:
        assert conv2d(x, w, Conv2dParams("avx512_core", "u8", impl)).acc.item() == want, impl


def test_padded_tap_is_zero_in_its_place():
    # C = 1, 1x3 kernel, left pad 1, gemm segment (kw0, kw1, kw2) padded to 4 slots.
    # ow = 0: (pad→0, x0, x1, 0): sat16(0 + 32385) + sat16(32385 + 0) = 64770
    # ow = 1: (x0, x1, x2, 0): sat16(64770) + 32385 = 65152
    x = np.full((1, 1, 1, 3), 255, dtype=np.uint8)
    w = np.full((1, 1, 1, 3), 127, dtype=np.int8)
    p = Conv2dParams("avx512_core", "u8", "gemm", ConvGeometry(pads=(0, 1, 0, 0)))
    assert conv2d(x, w, p).acc.ravel().tolist() == [64770, 65152]


def test_padded_tap_weights_leave_the_zero_point_term():
    # Same geometry, zp = 255: ow = 0 sums zp·w over the 2 in-bounds taps only:
    # 64770 − 255·254 = 0 (= exact Σ (255 − 255)·127); ow = 1: 65152 − 255·381 = −32003
    x = np.full((1, 1, 1, 3), 255, dtype=np.uint8)
    w = np.full((1, 1, 1, 3), 127, dtype=np.int8)
    p = Conv2dParams("avx512_core", "u8", "gemm", ConvGeometry(pads=(0, 1, 0, 0)), 255)
    assert conv2d(x, w, p).acc.ravel().tolist() == [0, 65152 - 255 * 381]


@pytest.mark.parametrize(("isa", "want"), [("avx2", 64), ("avx512_core", 64), ("avx2_vnni", 127)])
def test_requantization_worked_example(isa, want):
    # x = 255 (4 channels), w = 127, scales 1, y_scale = 1024:
    # exact 129540 / 1024 = 126.50… -> 127; non-VNNI 2·32767 / 1024 = 63.998… -> 64
    impl = "jit_uni" if isa == "avx2" else "brgemm"
    q = Requantization(1.0, 0, (1.0,), 1024.0, 0)
    x = np.full((1, 4), 255, dtype=np.uint8)
    w = np.full((1, 4), 127, dtype=np.int8)
    assert quantized_linear(x, w, QuantizedLinearParams(isa, impl, q)).y.item() == want


def test_avg_pool_jit_multiplies_ref_divides():
    # 2x7 window, s = 13·(−127) − 120 = −1771, s/14 = −126.5 exactly:
    # jit: f32(−1771) ⊗ rr(14) lands just below −126.5 -> −127; ref: −126.5 ties to even -> −126
    x = np.full((1, 1, 2, 7), -127, dtype=np.int8)
    x[0, 0, 1, 6] = -120
    assert float(np.float32(-1771) * rr(np.float32(14))) < -126.5  # just below the tie
    for impl, want in [("jit", -127), ("ref", -126)]:
        y = avg_pool2d(x, AvgPool2dParams("avx2", (2, 7), True, impl))
        assert y.dtype == np.int8
        assert y.item() == want, impl


def test_avg_pool_counts_padding_unless_excluded():
    # 2x2 window with one padded row: s = 10 + 20 = 30; exclude: 30/2 = 15; include: 30/4 = 7.5
    # -> 8 (ties to even)
    x = np.array([[[[10, 20]]]], dtype=np.uint8)
    geo = {"pads": (1, 0, 0, 0)}
    for exclude, want in [(True, 15), (False, 8)]:
        y = avg_pool2d(x, AvgPool2dParams("avx2", (2, 2), exclude, "ref", **geo))
        assert y.tolist() == [[[[want]]]]


@pytest.mark.parametrize(
    ("dst", "x", "want"),
    [
        (
            "s8",
            [0.5, 1.5, 2.5, -2.5, 127.5, -128.5, np.inf, -np.inf],
            [0, 2, 2, -2, 127, -128, 127, -128],
        ),
        ("u8", [127.5, -1.5, 255.5, 1e30], [128, 0, 255, 255]),
    ],
)
def test_reorder_ties_to_even_and_saturates(dst, x, want):
    y = reorder(np.array(x, dtype=np.float32), ReorderParams("avx2", dst))
    assert y.tolist() == want


def test_reorder_dst_scale_two_is_rne_of_half():
    # rr(2) = 0.5: 3 -> 1.5 -> 2, 5 -> 2.5 -> 2, -1 -> -0.5 -> 0
    y = reorder(np.array([3, 5, -1], dtype=np.float32), ReorderParams("avx2", "s8", 1.0, 2.0))
    assert y.tolist() == [2, 2, 0]


@pytest.mark.parametrize(
    ("isa", "dst", "scales", "want"),
    [
        ("avx2", "s8", (1.0, 1.0), -128),
        ("avx2", "u8", (1.0, 1.0), 0),
        ("avx512_core", "u8", (1.0, 1.0), 255),
        ("avx512_core_vnni", "u8", (1.0, 1.0), 255),
        ("avx512_core", "u8", (2.0, 1.0), 0),
        ("avx512_core", "s8", (1.0, 1.0), -128),
    ],
)
def test_reorder_nan_rules(isa, dst, scales, want):
    y = reorder(np.array([np.nan], dtype=np.float32), ReorderParams(isa, dst, *scales))
    assert y.tolist() == [want]


def test_round_trip_reciprocal_differs_for_some_scales():
    # rr(rr(s)) != s for about one binary32 value in six: the requantization must use it.
    s = np.arange(1, 200, dtype=np.float32) / np.float32(7)
    assert np.count_nonzero(rr(rr(s)) != s) > 0
    assert np.array_equal(rr(rr(rr(s))), rr(s))


def test_isa_semantics():
    assert [i.exact for i in Isa] == [False, False, True, True, True]
    assert Isa.AVX512_CORE_VNNI.env_value == "AVX512_CORE_VNNI"
