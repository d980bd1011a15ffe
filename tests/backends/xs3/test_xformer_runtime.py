"""The xformer OT runtime against its scalar twins, and the solver on hand-checked cases."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import signed_ints

from quantemu.backends.xs3.xformer import reference as ref
from quantemu.backends.xs3.xformer import runtime as rt
from quantemu.backends.xs3.xformer.compiled import recover_conv_weights, unpack_ot
from quantemu.backends.xs3.xformer.output_transform import OtKind, solve_output_transform

ACC = st.one_of(signed_ints(32), st.integers(-(2**33), 2**33))
I16 = signed_ints(16)


@given(ACC, I16, I16, st.tuples(st.integers(-3, 20), st.integers(-20, 20), st.booleans()))
def test_ot_group_matches_reference(acc, mul, bias, shifts):
    ishr, fshr, trunc = shifts
    mode = rt.VlashrRounding.DEVICE_TRUNCATE if trunc else rt.VlashrRounding.HOST
    got = rt.ot_group(np.array([acc]), np.array([mul]), np.array([bias]), ishr, fshr, rounding=mode)
    assert int(got[0]) == ref.ot_group(acc, mul, bias, ishr, fshr, truncate=trunc)


@given(ACC, st.integers(0, 20), I16, I16, st.integers(-20, 20))
def test_ot_channelwise_matches_reference(acc, shift, mul, bias, fshr):
    got = rt.ot_channelwise(
        np.array([acc]), np.array([shift]), np.array([mul]), np.array([bias]), fshr
    )
    assert int(got[0]) == ref.ot_channelwise(acc, shift, mul, bias, fshr)


@given(I16, st.integers(-40, 40))
def test_vlashr_matches_reference(t, s):
    for trunc, mode in ((False, rt.VlashrRounding.HOST), (True, rt.VlashrRounding.DEVICE_TRUNCATE)):
        assert int(rt.vlashr(np.array([t]), s, mode)[0]) == ref.vlashr(t, s, truncate=trunc)


def test_vdepth8_reaches_minus_128():
    assert rt.vdepth8_fixed(np.array([-32767])).tolist() == [-128]


@given(st.integers(1, 40), st.integers(1, 100), st.integers(0, 2**31))
def test_weight_reorder_roundtrip(c_out, k, seed):
    w = np.random.default_rng(seed).integers(-128, 128, (c_out, k)).astype(np.int8)
    data = []  # the forward reorder, written as the C loops it
    for g in range(-(-c_out // 16)):
        n = min(16, c_out - 16 * g)
        for icg in range(-(-k // 32)):
            for j in range(n):
                data.extend(w[16 * g + n - 1 - j, 32 * icg : 32 * icg + 32])
    data = np.array(data + [0] * 64, np.int8)
    assert np.array_equal(recover_conv_weights(data, c_out, k), w)


def test_unpack_ot_partial_group():
    c = 20  # one full group and a group of 4: [16 m][16 b][4 m][4 b] pad
    data = np.concatenate(
        [np.arange(16), 100 + np.arange(16), 16 + np.arange(4), 116 + np.arange(4)]
    )
    _, mul, bias = unpack_ot(np.pad(data, (0, 12)).astype(np.int16), c, False)
    assert mul.tolist() == list(range(20)) and bias.tolist() == list(range(100, 120))


def test_solver_group_small_conv():
    w = np.array([[1, -2, 3, 4], [0, 0, 0, 0]], np.int8)
    ot = solve_output_transform(
        w, np.array([10, 0]), s_in=0.5, zp_in=-1, s_w=np.float32([0.25, 1.0]), s_out=0.1, zp_out=3
    )
    assert ot.kind is OtKind.GROUP
    assert ot.canonical.mul[1] == 0.0 and ot.canonical.bias[1] == 3.0  # zero filter: singular
    # the emulated OT tracks the float model within 1 LSB on the whole accumulator range
    acc = np.arange(-600, 600)[:, None]
    y = rt.ot_group(acc, ot.mul, ot.bias, ot.initial_shr, ot.final_shr)
    exact = np.clip(np.round(acc * ot.canonical.eff + ot.canonical.cbias), -128, 127)
    assert np.abs(y[:, 0] - exact[:, 0]).max() <= 1
    assert (y[:, 1] == 3).all()
