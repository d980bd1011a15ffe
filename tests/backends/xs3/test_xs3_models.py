"""host_reference versus device: where they differ, and that they agree everywhere else.

``xs3.md`` section 7: the two models agree whenever no running sum reaches +-(2^31 - 1) and no
rounding add overflows. The goldens in ``test_xs3_goldens.py`` show accumulator differences for
conv2d_1x1, conv2d_depthwise, fully_connected_8 and the legacy fc; here are the rounding-add
differences and the agreement property.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from xs3_strategies import bso_tensors, int8_arrays, pack_bso_rows, windows

from quantemu.backends import xs3
from quantemu.backends.xs3 import ConvParams, Model, OutputOptions, Window, YParams

HOST, DEVICE = Model.HOST_REFERENCE, Model.DEVICE


def _a2max_bso(channels=4):
    # bias -100000 with shift1 0 gives r = SAT_16(-100000) = -32767; with scale, offset_scale
    # and offset all -32768: a2 = 32767*32768 + 32768*32768 = 2^31 - 32768. shift2 = 20.
    n = np.full(channels, -32768)
    return pack_bso_rows(np.full(channels, -100000), 0, n, n, n, 20)


@pytest.mark.parametrize("sym, host_y", [(False, -128), (True, -127)])
def test_page_a2max_example(sym, host_y):
    # xs3.md section 5: RSHR_W(2^31 - 32768, 20) wraps: (2^31 - 32768 + 2^19) - 2^32 is
    # -2^31 + 491520, floor(/2^20) = -2048 -> clamp lo. conv2d_1x1's exact RSHR gives 2048 ->
    # 127, and so does the device's non-wrapping VLSAT for conv2d_deep.
    x = np.zeros((1, 1, 4), dtype=np.int8)
    k = np.zeros((4, 1, 1, 4), dtype=np.int8)
    bso = _a2max_bso()

    def deep(model):
        params = ConvParams(0, Window(1, 1), YParams(1, 1, 4), OutputOptions(sym, model))
        return xs3.conv2d_deep(x, k, bso, params)

    assert deep(HOST).y.ravel().tolist() == [host_y] * 4
    assert deep(HOST).rounding_wrapped == 4
    assert deep(DEVICE).y.ravel().tolist() == [127] * 4
    one = xs3.conv2d_1x1(x, k.reshape(4, 4), bso, OutputOptions(sym))
    assert one.y.ravel().tolist() == [127] * 4


def test_fully_connected_16_a2max_host_vs_device():
    # Same a2 = 2^31 - 32768, shift2 20: host SAT_16(-2048) = -2048; device 2048.
    w, x = np.zeros((2, 4), dtype=np.int8), np.zeros(4, dtype=np.int8)
    bso = _a2max_bso(2)
    assert xs3.fully_connected_16(w, x, bso).y.tolist() == [-2048, -2048]
    assert xs3.fully_connected_16(w, x, bso, DEVICE).y.tolist() == [2048, 2048]


def test_shift1_rounding_wrap_host_vs_device():
    # xs3.md section 4: v = 2^31 - 1, s = 3: RSHR_W = -2^28, so SAT_16 gives -32767 on the host;
    # the device's RSHR gives 2^28 -> +32767. With scale 1 and shift2 8: RSHR(+-32767, 8) =
    # 128 -> 127 and -128.
    x = np.zeros((1, 1, 4), dtype=np.int8)
    bso = pack_bso_rows(np.full(4, 2**31 - 1), 3, 1, 0, 0, 8)
    host = xs3.conv2d_1x1(x, np.zeros((4, 4), dtype=np.int8), bso)
    dev = xs3.conv2d_1x1(x, np.zeros((4, 4), dtype=np.int8), bso, OutputOptions(model=DEVICE))
    assert host.y.ravel().tolist() == [-128] * 4
    assert dev.y.ravel().tolist() == [127] * 4


MODERATE = st.integers(-(2**24), 2**24)


def _both(fn, *args, **kwargs):
    return fn(*args, model=HOST, **kwargs), fn(*args, model=DEVICE, **kwargs)


def _assert_agree(host, dev):
    assume(host.acc_saturated == host.acc_wrapped == host.rounding_wrapped == 0)
    assume(dev.acc_saturated == 0)
    np.testing.assert_array_equal(host.y, dev.y)
    np.testing.assert_array_equal(host.acc, dev.acc)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), op=st.sampled_from(["conv2d_deep", "conv2d_depthwise", "conv2d_1x1"]))
def test_models_agree_away_from_the_rails_conv(data, op):
    x_h, x_w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    c = data.draw(st.sampled_from([4, 36]))
    x = data.draw(int8_arrays((x_h, x_w, c)))
    bso = data.draw(bso_tensors(c, bias=MODERATE))
    if op == "conv2d_1x1":
        k = data.draw(int8_arrays((c, c)))
        host, dev = (xs3.conv2d_1x1(x, k, bso, OutputOptions(False, m)) for m in (HOST, DEVICE))
    else:
        window, yp = data.draw(windows(x_h, x_w))
        shape = (
            (c, window["height"], window["width"], c)
            if op == "conv2d_deep"
            else (window["height"], window["width"], c)
        )
        k = data.draw(int8_arrays(shape))
        host, dev = (
            getattr(xs3, op)(
                x,
                k,
                bso,
                ConvParams(0, Window(**window), YParams(channels=c, **yp), OutputOptions(False, m)),
            )
            for m in (HOST, DEVICE)
        )
    _assert_agree(host, dev)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), bits=st.sampled_from([8, 16]))
def test_models_agree_away_from_the_rails_fc(data, bits):
    c_in, c_out = data.draw(st.sampled_from([4, 64])), data.draw(st.integers(1, 20))
    w, x = data.draw(int8_arrays((c_out, c_in))), data.draw(int8_arrays((c_in,)))
    bso = data.draw(bso_tensors(c_out, bias=MODERATE))
    if bits == 8:
        host, dev = (
            xs3.fully_connected_8(w, x, bso, OutputOptions(False, m)) for m in (HOST, DEVICE)
        )
    else:
        host, dev = _both(xs3.fully_connected_16, w, x, bso)
    _assert_agree(host, dev)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), bits=st.sampled_from([8, 16]))
def test_models_agree_away_from_the_rails_legacy(data, bits):
    c_out = data.draw(st.integers(1, 16))
    w, x = data.draw(int8_arrays((c_out, 64))), data.draw(int8_arrays((64,)))
    b = np.array(data.draw(st.lists(MODERATE, min_size=c_out, max_size=c_out)), dtype=np.int32)
    sh = np.array(
        data.draw(st.lists(st.integers(0, 31), min_size=c_out, max_size=c_out)), dtype=np.uint16
    )
    sc = np.array(
        data.draw(st.lists(st.integers(-32768, 32767), min_size=c_out, max_size=c_out)),
        dtype=np.int16,
    )
    fn = xs3.fc_deepin_shallowout_16 if bits == 16 else xs3.fc_deepin_shallowout_8
    _assert_agree(*_both(fn, w, b, x, sh, sc))
