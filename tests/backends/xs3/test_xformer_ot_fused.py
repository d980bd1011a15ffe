"""The fused int32 output transform equals lib_nn's reference OT (runtime.py) bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends.xs3.xformer.add import XcAddParams, add_elementwise_int8
from quantemu.backends.xs3.xformer.ot_fused import plan_ot, run_fused
from quantemu.backends.xs3.xformer.runtime import VlashrRounding, ot_channelwise, ot_group

ROUNDINGS = list(VlashrRounding)


def _kw(initial_left, final_shr, acc_bound, rounding):
    return {"initial_left": initial_left, "final_shr": final_shr, "acc_bound": acc_bound,
            "rounding": rounding}  # fmt: skip


def _params(rng, c):
    pick = rng.integers(0, 3)
    mul = rng.choice([rng.integers(-32768, 32768, c), rng.integers(1, 64, c),
                      np.full(c, 32767)][pick])  # fmt: skip
    bias = rng.choice([rng.integers(-32768, 32768, c), rng.integers(-300, 300, c)][pick % 2])
    return mul.astype(np.int16), bias.astype(np.int16)


def _acc(rng, bound, shape):
    acc = rng.integers(-bound, bound + 1, shape, dtype=np.int64)
    acc.reshape(-1)[:2] = (-bound, bound)  # the extremes the plan's proof relies on
    return acc


@pytest.mark.parametrize("seed", range(300))
def test_fused_equals_reference(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 9))
    bound = np.asarray(rng.choice([2**7, 2**15, 2**20, 2**31 - 2**16]), np.int64)
    acc = _acc(rng, int(bound), (5, 3, c))
    mul, bias = _params(rng, c)
    fshr = int(rng.integers(-36, 20))
    rounding = ROUNDINGS[seed % 2]
    ishr = 0
    if seed % 3:
        shift = rng.integers(0, 17, c).astype(np.int16)
        want = ot_channelwise(acc, shift, mul, bias, fshr, rounding=rounding)
        plan = plan_ot(shift, mul, bias, **_kw(0, fshr, bound, rounding))
    else:
        ishr = int(rng.integers(-34, 17))
        want = ot_group(acc, mul, bias, ishr, fshr, rounding=rounding)
        plan = plan_ot(
            np.full(c, max(ishr, 0)), mul, bias, **_kw(max(-ishr, 0), fshr, bound, rounding)
        )
    if plan is None:
        assert ishr <= -32 or bound > 2**31 - 2**17
        return
    got = run_fused(plan, acc)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run_fused(plan, acc.astype(np.int32)), want)


def test_per_channel_bound_skips_clamps():
    plan = plan_ot([2, 2], [100, 100], [1, 2], **_kw(0, 3, 1000, VlashrRounding.HOST))
    assert ("sat16", None) not in plan.steps
    assert plan.steps[0] == ("shr", 2)


def test_left_tail_folds_into_one_shift():
    plan = plan_ot([5, 5], [9000, -9000], [3, -7], **_kw(0, -2, 2**20, VlashrRounding.HOST))
    assert [op for op, _ in plan.steps] == ["shr", "sat16", "mul", "add", "shr"]


@pytest.mark.parametrize("fshr", range(-16, 2))
def test_left_tails_over_every_lane_value(fshr):
    acc = np.arange(-40000, 40001, dtype=np.int64)[:, None]  # every 16-bit lane, and beyond
    mul = np.array([32767, -32768, 16384, 3, -1, 0, 20000, -20000], np.int16)
    bias = np.array([-32768, 32767, 0, -32000, 31000, 5, -16384, 16384], np.int16)
    acc = np.broadcast_to(acc, (acc.shape[0], mul.size))
    for rounding, b in zip(ROUNDINGS, (bias, bias // 64), strict=True):  # both tail forms
        want = ot_group(acc, mul, b, 0, fshr, rounding=rounding)
        plan = plan_ot(np.zeros(mul.size), mul, b, **_kw(0, fshr, 40000, rounding))
        np.testing.assert_array_equal(run_fused(plan, acc), want)


@pytest.mark.parametrize("seed", range(40))
def test_xc_add_int32_equals_python_ints(seed):
    rng = np.random.default_rng(seed)
    m1, m2 = (int(v) >> int(rng.integers(0, 14)) for v in rng.integers(-(2**23), 2**23, 2))
    shift, bias = int(rng.integers(1, 32)), int(rng.integers(-(2**30), 2**30)) >> 9
    params = XcAddParams(m1=m1, m2=m2, bias=bias, shift=shift)  # some beyond int32: wide path
    a = rng.integers(-128, 128, (3, 4)).astype(np.int8)
    b = rng.integers(-128, 128, 4).astype(np.int8)
    a[0, :2], b[:2] = (-128, 127), (-128, 127)
    wide = bias + a.astype(object) * m1 + b.astype(object) * m2 + (1 << (shift - 1))
    want = np.clip(wide >> shift, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(add_elementwise_int8(a, b, params), want)
