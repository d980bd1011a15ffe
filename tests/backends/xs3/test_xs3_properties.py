"""Properties that tie the XS3 operators to one another (issue 3, "Done when")."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from xs3_strategies import bso_tensors, int8_arrays, rail_biases, windows

from quantemu.backends import xs3
from quantemu.backends.xs3 import ConvParams, OutputOptions, Window, YParams

SMALL_BIAS = st.integers(-(2**20), 2**20)
FEW = settings(max_examples=40, deadline=None)


def _quiet(*results):
    """Nothing saturated or wrapped in the accumulators and no rounding add wrapped."""
    return all(r.acc_saturated == r.acc_wrapped == r.rounding_wrapped == 0 for r in results)


@FEW
@given(data=st.data(), sym=st.booleans())
def test_deep_equals_1x1_on_1x1_windows(data, sym):
    h, w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    c_in, c_out = data.draw(st.sampled_from([4, 36, 64])), data.draw(st.sampled_from([4, 20]))
    x = data.draw(int8_arrays((h, w, c_in)))
    k = data.draw(int8_arrays((c_out, c_in)))
    bso = data.draw(bso_tensors(c_out, bias=SMALL_BIAS))
    opts = OutputOptions(sym)
    deep = xs3.conv2d_deep(
        x,
        k.reshape(c_out, 1, 1, c_in),
        bso,
        ConvParams(data.draw(st.integers(-128, 127)), Window(1, 1), YParams(h, w, c_out), opts),
    )
    one = xs3.conv2d_1x1(x, k, bso, opts)
    assume(_quiet(deep, one))
    np.testing.assert_array_equal(deep.y, one.y)
    np.testing.assert_array_equal(deep.acc, one.acc)


def _shallow_pair(data, bias):
    x_h, x_w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    c_in = data.draw(st.sampled_from([4, 8, 16, 32]))
    window, yp = data.draw(windows(x_h, x_w, max_kw=min(3, 32 // c_in)))
    params = ConvParams(
        data.draw(st.integers(-128, 127)),
        Window(**window),
        YParams(channels=8, **yp),
        OutputOptions(data.draw(st.booleans())),
    )
    x = data.draw(int8_arrays((x_h, x_w, c_in)))
    k = data.draw(int8_arrays((8, window["height"], window["width"], c_in)))
    k_aug = np.zeros((8, window["height"], 32 // c_in, c_in), dtype=np.int8)
    k_aug[:, :, : window["width"]] = k
    bso = data.draw(bso_tensors(8, bias=bias))
    deep = xs3.conv2d_deep(x, k, bso, params)
    shallow = xs3.conv2d_shallowin(x, k_aug, bso, params)
    return window, deep, shallow


@FEW
@given(data=st.data())
def test_shallowin_equals_deep_where_both_apply(data):
    _, deep, shallow = _shallow_pair(data, SMALL_BIAS)
    assume(deep.acc_saturated == shallow.acc_saturated == 0)
    np.testing.assert_array_equal(deep.y, shallow.y)


@FEW
@given(data=st.data())
def test_shallowin_equals_deep_even_at_the_rails_when_one_tap_per_row(data):
    # With window.width == 1 and C_in <= 32, deep's one chunk per tap is shallowin's one step
    # per row: same steps, same ROWS(oy) order, same wrapping output stage.
    window, deep, shallow = _shallow_pair(data, rail_biases(2**18))
    assume(window["width"] == 1)
    np.testing.assert_array_equal(deep.acc, shallow.acc)
    np.testing.assert_array_equal(deep.y, shallow.y)


@FEW
@given(data=st.data(), sym=st.booleans())
def test_depthwise_equals_per_channel_deep(data, sym):
    # Depthwise channel c is a deep conv whose kernel is K[..., c] on input channel c only.
    x_h, x_w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    c = data.draw(st.sampled_from([4, 8]))
    window, yp = data.draw(windows(x_h, x_w))
    params = ConvParams(
        data.draw(st.integers(-128, 127)),
        Window(**window),
        YParams(channels=c, **yp),
        OutputOptions(sym),
    )
    x = data.draw(int8_arrays((x_h, x_w, c)))
    k = data.draw(int8_arrays((window["height"], window["width"], c)))
    bso = data.draw(bso_tensors(c, bias=st.integers(-(2**31), 2**31 - 1)))
    k_deep = np.zeros((c, window["height"], window["width"], c), dtype=np.int8)
    k_deep[np.arange(c), :, :, np.arange(c)] = np.moveaxis(k, -1, 0)
    dw = xs3.conv2d_depthwise(x, k, bso, params)
    deep = xs3.conv2d_deep(x, k_deep, bso, params)
    assume(_quiet(dw, deep))
    np.testing.assert_array_equal(dw.y, deep.y)
