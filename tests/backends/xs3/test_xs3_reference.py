"""The vectorised XS3 operators equal the naive page-pseudo-code model, both models, with ``==``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from xs3_strategies import bso_tensors, int8_arrays, windows

from quantemu.backends import xs3
from quantemu.backends.xs3 import ConvParams, Model, OutputOptions, Window, YParams
from quantemu.backends.xs3.bso import reference as ref

MODELS = st.sampled_from([Model.HOST_REFERENCE, Model.DEVICE])
FEW = settings(max_examples=40, deadline=None)


def _params(zp, window, yp, sym, model):
    return ConvParams(zp, Window(**window), YParams(**yp), OutputOptions(sym, model))


def _ref(zp, window, yp, sym, model):
    """The keyword arguments of the scalar reference for one windowed case."""
    return {
        "zp": zp,
        "window": window,
        "y_params": yp,
        "symmetric": sym,
        "device": model is Model.DEVICE,
    }


def _check(result, expected):
    assert result.y.dtype == expected.dtype
    assert result.y.shape == expected.shape
    np.testing.assert_array_equal(result.y, expected)


@FEW
@given(data=st.data(), model=MODELS, sym=st.booleans())
def test_conv2d_deep_matches_reference(data, model, sym):
    x_h, x_w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    c_in = data.draw(st.sampled_from([4, 8, 36, 40]))
    c_out = data.draw(st.sampled_from([4, 8, 20]))
    window, yp = data.draw(windows(x_h, x_w))
    yp["channels"] = c_out
    x = data.draw(int8_arrays((x_h, x_w, c_in)))
    k = data.draw(int8_arrays((c_out, window["height"], window["width"], c_in)))
    bso = data.draw(bso_tensors(c_out))
    zp = data.draw(st.sampled_from([-128, -1, 0, 127]) | st.integers(-128, 127))
    got = xs3.conv2d_deep(x, k, bso, _params(zp, window, yp, sym, model))
    expected = ref.conv_windowed("conv2d_deep", x, k, bso, **_ref(zp, window, yp, sym, model))
    _check(got, expected)


@FEW
@given(data=st.data(), model=MODELS, sym=st.booleans())
def test_conv2d_shallowin_matches_reference(data, model, sym):
    x_h, x_w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    c_in = data.draw(st.sampled_from([4, 8, 16, 32]))
    c_out = data.draw(st.sampled_from([4, 12, 20]))
    window, yp = data.draw(windows(x_h, x_w, max_kw=min(3, 32 // c_in)))
    yp["channels"] = c_out
    x = data.draw(int8_arrays((x_h, x_w, c_in)))
    k = np.zeros((c_out, window["height"], 32 // c_in, c_in), dtype=np.int8)
    k[:, :, : window["width"], :] = data.draw(
        int8_arrays((c_out, window["height"], window["width"], c_in))
    )
    bso = data.draw(bso_tensors(c_out))
    zp = data.draw(st.integers(-128, 127))
    got = xs3.conv2d_shallowin(x, k, bso, _params(zp, window, yp, sym, model))
    expected = ref.conv_windowed("conv2d_shallowin", x, k, bso, **_ref(zp, window, yp, sym, model))
    _check(got, expected)


@FEW
@given(data=st.data(), model=MODELS, sym=st.booleans())
def test_conv2d_1x1_matches_reference(data, model, sym):
    h, w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    c_in = data.draw(st.sampled_from([4, 12, 32, 40, 68]))
    c_out = data.draw(st.sampled_from([4, 8, 36]))
    x = data.draw(int8_arrays((h, w, c_in)))
    k = data.draw(int8_arrays((c_out, c_in)))
    bso = data.draw(bso_tensors(c_out))
    got = xs3.conv2d_1x1(x, k, bso, OutputOptions(sym, model))
    _check(got, ref.conv2d_1x1(x, k, bso, symmetric=sym, device=model is Model.DEVICE))


@FEW
@given(data=st.data(), model=MODELS, sym=st.booleans())
def test_conv2d_depthwise_matches_reference(data, model, sym):
    x_h, x_w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    c = data.draw(st.sampled_from([4, 8, 20]))
    window, yp = data.draw(windows(x_h, x_w))
    yp["channels"] = c
    x = data.draw(int8_arrays((x_h, x_w, c)))
    k = data.draw(int8_arrays((window["height"], window["width"], c)))
    bso = data.draw(bso_tensors(c))
    zp = data.draw(st.integers(-128, 127))
    got = xs3.conv2d_depthwise(x, k, bso, _params(zp, window, yp, sym, model))
    expected = ref.conv2d_depthwise(x, k, bso, **_ref(zp, window, yp, sym, model))
    _check(got, expected)


@FEW
@given(data=st.data(), model=MODELS, sym=st.booleans(), bits=st.sampled_from([8, 16]))
def test_fully_connected_matches_reference(data, model, sym, bits):
    c_in = data.draw(st.sampled_from([4, 8, 36, 100]))
    c_out = data.draw(st.integers(1, 40))
    w = data.draw(int8_arrays((c_out, c_in)))
    x = data.draw(int8_arrays((c_in,)))
    bso = data.draw(bso_tensors(c_out))
    if bits == 8:
        got = xs3.fully_connected_8(w, x, bso, OutputOptions(sym, model))
        op = "fully_connected_8"
    else:
        got, op, sym = xs3.fully_connected_16(w, x, bso, model), "fully_connected_16", False
    _check(got, ref.fully_connected(op, w, x, bso, symmetric=sym, device=model is Model.DEVICE))


@FEW
@given(data=st.data(), model=MODELS, bits=st.sampled_from([8, 16]))
def test_fc_deepin_shallowout_matches_reference(data, model, bits):
    from xs3_strategies import biases, int16_values
    from xs3_strategies import shifts as shift_values

    c_in = data.draw(st.sampled_from([32, 64, 96]))
    c_out = data.draw(st.integers(1, 16))
    w = data.draw(int8_arrays((c_out, c_in)))
    x = data.draw(int8_arrays((c_in,)))

    def column(values, dtype):
        return np.array(data.draw(st.lists(values, min_size=c_out, max_size=c_out)), dtype=dtype)

    b = column(biases, np.int32)
    sh = column(shift_values, np.uint16)
    sc = column(int16_values, np.int16)
    fn = xs3.fc_deepin_shallowout_16 if bits == 16 else xs3.fc_deepin_shallowout_8
    got = fn(w, b, x, sh, sc, model=model)
    _check(got, ref.fc_legacy(bits, (w, b, x, sh, sc), device=model is Model.DEVICE))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), op=st.sampled_from(["conv2d_deep", "conv2d_shallowin"]), model=MODELS)
def test_padded_row_order_near_rails(data, op, model):
    """Windows with padding rows above and below and biases near a rail: ROWS(oy) matters."""
    from xs3_strategies import rail_biases

    x_h, x_w, c_in = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)), 8
    k_h = data.draw(st.integers(2, 4))
    r0 = data.draw(st.integers(-(k_h - 1), 0))
    k_w = data.draw(st.integers(1, 2))
    window = {
        "height": k_h,
        "width": k_w,
        "start_row": r0,
        "start_col": data.draw(st.integers(1 - k_w, 0)),
        "stride_v": 1,
        "stride_h": 1,
    }
    yp = {"height": x_h - r0, "width": 1, "channels": 4}
    # Extreme values make row sums large against the bias's distance to the rail.
    extreme = st.sampled_from([-128, -127, 127])
    x = data.draw(arrays(np.int8, (x_h, x_w, c_in), elements=extreme))
    cols = window["width"] if op == "conv2d_deep" else 32 // c_in
    k = np.zeros((4, k_h, cols, c_in), dtype=np.int8)
    k[:, :, :k_w] = data.draw(arrays(np.int8, (4, k_h, k_w, c_in), elements=extreme))
    bso = data.draw(bso_tensors(4, bias=rail_biases(2**19)))
    zp = data.draw(st.sampled_from([-128, 127, -100, 100]))
    got = getattr(xs3, op)(x, k, bso, _params(zp, window, yp, False, model))
    # The accumulators show the order directly (the output stage often saturates them away).
    acc = ref.conv_windowed_acc(op, x, k, bso, zp=zp, window=window, y_params=yp)
    np.testing.assert_array_equal(got.acc, acc)
    _check(got, ref.conv_windowed(op, x, k, bso, **_ref(zp, window, yp, False, model)))
