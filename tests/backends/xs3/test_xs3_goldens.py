"""Hand-derived goldens, one or more per operator; the arithmetic is in the comments.

Notation as on ``conformance/xs3.md``: RSHR(v, s) = floor((v + 2^(s-1)) / 2^s), RSHR_W the same
with the add wrapped to int32, SAT_b symmetric saturation.
"""

from __future__ import annotations

import numpy as np
from xs3_strategies import pack_bso_rows

from quantemu.backends import xs3
from quantemu.backends.xs3 import ConvParams, Model, OutputOptions, Window, YParams

RAIL = 2**31 - 1
HOST, DEVICE = Model.HOST_REFERENCE, Model.DEVICE


def _bso(rows):
    """``rows`` = per-channel (bias, shift1, scale, offset_scale, offset, shift2)."""
    cols = list(zip(*rows, strict=True))
    return pack_bso_rows(*cols)


def _deep_case():
    # X is 1x2x4; window 1x2 starting one column left (zero_point 2 pads column -1); Y is 1x2.
    x = np.array([[[1, 2, 3, 4], [-1, -2, -3, -4]]], dtype=np.int8)
    k = np.zeros((4, 1, 2, 4), dtype=np.int8)
    k[:, 0, 0, :] = 1  # tap 0: sum of the pixel's channels
    k[:, 0, 1, 3] = 1  # tap 1: channel 3 of the pixel
    # ox=0: tap 0 reads padding: 2*4 = 8; tap 1 reads X[0,0,3] = 4  -> 12
    # ox=1: tap 0 reads X[0,0]: 1+2+3+4 = 10; tap 1 reads X[0,1,3] = -4  -> 6
    bso = _bso(
        [
            (0, 0, 1, 0, 0, 0),  # y = acc: 12, 6
            (3, 1, 1, 0, 0, 0),  # acc 15, 9: RSHR(15,1) = 8, RSHR(9,1) = 5
            # acc -2, -8: RSHR(-2,2) = floor(0/4) = 0, RSHR(-8,2) = floor(-6/4) = -2;
            # a2 = 0*100 + 2*(-3) = -6 and -2*100 - 6 = -206;
            # RSHR(-6,1) = floor(-5/2) = -3, RSHR(-206,1) = floor(-205/2) = -103
            (-14, 2, 100, 2, -3, 1),
            (1000, 0, 1, 0, 0, 0),  # acc 1012, 1006 -> clamp 127
        ]
    )
    params = ConvParams(2, Window(1, 2, 0, -1, 1, 1), YParams(1, 2, 4))
    return x, k, bso, params


def test_conv2d_deep_golden():
    x, k, bso, params = _deep_case()
    r = xs3.conv2d_deep(x, k, bso, params)
    assert r.acc[0].T.tolist() == [[12, 6], [15, 9], [-2, -8], [1012, 1006]]
    assert r.y.dtype == np.int8
    assert r.y[0].T.tolist() == [[12, 6], [8, 5], [-3, -103], [127, 127]]
    assert (r.acc_saturated, r.output_saturated) == (0, 2)


def test_conv2d_shallowin_golden():
    # The deep case with the kernel augmented to 32/C_in = 8 columns (columns 2..7 zero).
    x, k, bso, params = _deep_case()
    k_aug = np.zeros((4, 1, 8, 4), dtype=np.int8)
    k_aug[:, :, :2] = k
    r = xs3.conv2d_shallowin(x, k_aug, bso, params)
    assert r.y[0].T.tolist() == [[12, 6], [8, 5], [-3, -103], [127, 127]]


def _row_order_case(op):
    # X is 1x1x4 of ones; window 2x1 from row 0: kernel row 1 reads row 1, below the image
    # (zero_point 100). K row 0 (inside) sums to -4, row 1 (padding) to 100*4 = 400.
    x = np.ones((1, 1, 4), dtype=np.int8)
    cols = 1 if op == "conv2d_deep" else 8
    k = np.zeros((4, 2, cols, 4), dtype=np.int8)
    k[:, 0, 0, :] = -1
    k[:, 1, 0, :] = 1
    bso = _bso([(RAIL - 100, 0, 1, 0, 0, 0)] * 4)
    return x, k, bso, ConvParams(100, Window(2, 1, 0, 0, 1, 1), YParams(1, 1, 4))


def test_padded_row_order_golden():
    # ROWS(0) = [1, 0]: the padding row first. (2^31-1-100) + 400 clamps to 2^31-1, then
    # -4 gives 2^31-5. Row-major order would give 2^31-105 then clamp: 2^31-1.
    for op in ("conv2d_deep", "conv2d_shallowin"):
        x, k, bso, params = _row_order_case(op)
        r = getattr(xs3, op)(x, k, bso, params)
        assert r.acc.ravel().tolist() == [RAIL - 4] * 4
        assert r.acc_saturated == 4


def test_conv2d_deep_saturates_per_32_chunk():
    # C_in = 64 in one tap: chunk 0 sums 32*1 = 32, chunk 1 sums 32*(-1) = -32.
    # bias 2^31-1-10: +32 clamps to 2^31-1, -32 gives 2^31-33 (exact sum: 2^31-11).
    x = np.ones((1, 1, 64), dtype=np.int8)
    k = np.ones((4, 1, 1, 64), dtype=np.int8)
    k[:, :, :, 32:] = -1
    bso = _bso([(RAIL - 10, 0, 1, 0, 0, 0)] * 4)
    params = ConvParams(0, Window(1, 1), YParams(1, 1, 4))
    assert xs3.conv2d_deep(x, k, bso, params).acc.ravel().tolist() == [RAIL - 32] * 4


def _1x1_case():
    x = np.array([[[10, -20, 30, -40]]], dtype=np.int8)
    k = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 2], [-1, -1, -1, -1]], dtype=np.int8)
    return x, k


def test_conv2d_1x1_golden():
    # dot products -20, 10, -80, 20; bias 5 -> acc -15, 15, -75, 25.
    # shift1 1: RSHR(-15,1) = floor(-14/2) = -7; 8; RSHR(-75,1) = floor(-74/2) = -37; 13.
    # a2 = 3r + 2*2: -17, 28, -107, 43. shift2 2: floor(-15/4) = -4; floor(30/4) = 7;
    # floor(-105/4) = -27; floor(45/4) = 11.
    x, k = _1x1_case()
    r = xs3.conv2d_1x1(x, k, _bso([(5, 1, 3, 2, 2, 2)] * 4))
    assert r.y.ravel().tolist() == [-4, 7, -27, 11]


def test_conv2d_1x1_per_product_saturation_host_vs_device():
    # Channel 0 products 10, -20, 30, -40 from bias 2^31-1-5: host clamps after +10
    # (2^31-1), then -20, +30 (clamps again), -40: 2^31-41. Device: one 32-byte chunk of sum
    # -20: 2^31-26. Channels 1-3 stay far from the rail.
    x, k = _1x1_case()
    bso = _bso([(RAIL - 5, 0, 1, 0, 0, 0)] + [(0, 0, 1, 0, 0, 0)] * 3)
    host = xs3.conv2d_1x1(x, k, bso)
    dev = xs3.conv2d_1x1(x, k, bso, OutputOptions(model=DEVICE))
    assert host.acc[0, 0, 0] == RAIL - 40
    assert dev.acc[0, 0, 0] == RAIL - 25
    assert (host.acc_saturated, dev.acc_saturated) == (1, 0)


def test_conv2d_depthwise_golden():
    # X 1x2x4, K 1x2x4, window 1x2 from column -1, zero_point -3.
    # ox=0: -3*K[0,0,c] + X[0,0,c]*K[0,1,c] = -3 + 2x: [-1, 1, 3, 5]
    # ox=1: X[0,0,c]*1 + X[0,1,c]*2: [11, 14, 17, 20]
    x = np.array([[[1, 2, 3, 4], [5, 6, 7, 8]]], dtype=np.int8)
    k = np.array([[[1, 1, 1, 1], [2, 2, 2, 2]]], dtype=np.int8)
    bso = _bso(
        [
            (0, 0, 1, 0, 0, 0),  # -1, 11
            # acc 11, 24; RSHR(.,1) = 6, 12; *-2 = -12, -24; +3*(-1) = -15, -27;
            # RSHR(.,1) = floor(-14/2) = -7, floor(-26/2) = -13
            (10, 1, -2, 3, -1, 1),
            # acc -2^31+3, -2^31+17; RSHR_W(., 31) = floor((v + 2^30)/2^31) = -1 for both;
            # a2 = -32767 -> clamp -128
            (-(2**31), 31, 32767, 0, 0, 0),
            # acc 2^31-11+5 = 2^31-6 and 2^31-11+20 = 2^31+9, which WRAPS to -2^31+9.
            # SAT_16: 32767, -32767. RSHR(32767,8) = floor(32895/256) = 128 -> 127;
            # RSHR(-32767,8) = floor(-32639/256) = -128.
            (RAIL - 10, 0, 1, 0, 0, 8),
        ]
    )
    params = ConvParams(-3, Window(1, 2, 0, -1, 1, 1), YParams(1, 2, 4))
    r = xs3.conv2d_depthwise(x, k, bso, params)
    assert r.y[0].T.tolist() == [[-1, 11], [-7, -13], [-128, -128], [127, -128]]
    assert r.acc_wrapped == 1
    # The device saturates per product instead: 2^31-11 + 4 + 16 clamps to 2^31-1 -> 127.
    dev = xs3.conv2d_depthwise(
        x, k, bso, ConvParams(-3, params.window, params.y_params, OutputOptions(model=DEVICE))
    )
    assert dev.y[0, 1, 3] == 127


def _fc_case():
    # X = [1, -2, 3, -4]: W0 . X = 1-2+3-4 = -2; W1 . X = 127*(-2) = -254;
    # W2 . X = -128*1 + -128*-4 = 384.
    w = np.array([[1, 1, 1, 1], [127, 127, 127, 127], [-128, 0, 0, -128]], dtype=np.int8)
    return w, np.array([1, -2, 3, -4], dtype=np.int8)


def test_fully_connected_8_golden():
    w, x = _fc_case()
    bso = _bso(
        [
            (0, 0, 1, 0, 0, 0),  # -2
            (0, 1, 1, 0, 0, 0),  # RSHR(-254, 1) = floor(-253/2) = -127
            # exact 2^31-1-100+384 saturates once at the end: 2^31-1. shift1 24 on the host:
            # 2^31-1 + 2^23 wraps to -2^31+2^23-1; floor(that / 2^24) = -128 -> r = -128.
            (RAIL - 100, 24, 1, 0, 0, 0),
        ]
    )
    host = xs3.fully_connected_8(w, x, bso)
    assert host.y.tolist() == [-2, -127, -128]
    assert (host.acc_saturated, host.rounding_wrapped) == (1, 1)
    # Device: no wrap in the rounding add: floor((2^31-1 + 2^23) / 2^24) = 128 -> 127.
    assert xs3.fully_connected_8(w, x, bso, OutputOptions(model=DEVICE)).y.tolist()[2] == 127
    # Symmetric saturation: -128 becomes -127.
    assert xs3.fully_connected_8(w, x, bso, OutputOptions(True)).y.tolist() == [-2, -127, -127]


def test_fully_connected_16_golden():
    w, x = _fc_case()
    bso = _bso(
        [
            (1000, 0, 2, 100, 7, 0),  # acc 998; a2 = 1996 + 700 = 2696
            # a2 = -254 * -32768 = 8323072; RSHR_W(., 4) = 520192 -> SAT_16 32767
            (0, 0, -32768, 0, 0, 4),
            # RSHR(384, 2) = 96; a2 = 288 - 1 = 287; RSHR(287, 1) = floor(288/2) = 144
            (0, 2, 3, -1, 1, 1),
        ]
    )
    r = xs3.fully_connected_16(w, x, bso)
    assert r.y.dtype == np.int16
    assert r.y.tolist() == [2696, 32767, 144]


def _legacy_case():
    w = np.stack([np.full(32, 2), np.full(32, -1)]).astype(np.int8)
    x = np.ones(32, dtype=np.int8)  # dot products 64 and -32
    b = np.array([100, -(2**31) + 10], dtype=np.int32)
    return w, b, x, np.array([2, 0], dtype=np.uint16), np.array([16384, 8192], dtype=np.int16)


def test_fc_deepin_shallowout_16_golden():
    # ch0: acc 164; RSHR(164, 2) = 41; 41 * 16384 (1.0 in Q1.14) >> 14 = 41.
    # ch1 (host): -2^31+10-32 wraps to 2^31-22 (the C adds in int32, then widens). SAT_16 ->
    # 32767; 32767*8192 = 268427264; RSHR(., 14) = floor(16383.5 + 0.5) = 16384.
    # ch1 (device): per-chunk saturation to -(2^31-1); r = -32767; -268427264 -> RSHR =
    # floor(-16383.5 + 0.5) = -16383.
    args = _legacy_case()
    host = xs3.fc_deepin_shallowout_16(*args)
    assert host.y.dtype == np.int16
    assert host.acc.tolist() == [164, 2**31 - 22]
    assert host.y.tolist() == [41, 16384]
    assert host.acc_wrapped == 1
    assert xs3.fc_deepin_shallowout_16(*args, model=DEVICE).y.tolist() == [41, -16383]


def test_fc_deepin_shallowout_8_golden():
    # y8 = SAT_8(RSHR(y16, 8)): RSHR(41, 8) = floor(169/256) = 0; RSHR(16384, 8) = 64;
    # device: RSHR(-16383, 8) = floor(-16255/256) = -64.
    args = _legacy_case()
    assert xs3.fc_deepin_shallowout_8(*args).y.tolist() == [0, 64]
    assert xs3.fc_deepin_shallowout_8(*args, model=DEVICE).y.tolist() == [0, -64]


def test_legacy_lift_of_minus_2_31():
    # B = -2^31 + 32, one chunk of dot product -32: WRAP32 gives exactly -2^31, which the C
    # lifts to -(2^31-1) (max(., -(2^31-1))). Shift 0 -> SAT_16 -32767; scale 16384 -> -32767.
    w = np.full((1, 32), -1, dtype=np.int8)
    x = np.ones(32, dtype=np.int8)
    b = np.array([-(2**31) + 32], dtype=np.int32)
    r = xs3.fc_deepin_shallowout_16(
        w, b, x, np.array([0], dtype=np.uint16), np.array([16384], dtype=np.int16)
    )
    assert r.acc.tolist() == [-RAIL]
    assert r.y.tolist() == [-32767]
