"""The fused SDP pass (``nvdla.sdp_fast`` behind ``SdpStage.run``) equals :func:`sdp`, with ``==``.

Register sets are drawn raw over every field (as in the reference tests), with the LUT off
and compare mode often off so that the fused path, not its fallback, runs; X-unit operands are
per-channel, EW operands per element, as the lowering programs them.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from nvdla_strategies import sdp_cases

from quantemu.backends.nvdla import SdpRegisters, sdp
from quantemu.backends.nvdla.lower.sdp import SdpStage
from quantemu.backends.nvdla.sdp_fast import Fallback

MANY = settings(max_examples=150, deadline=None)
X_UNIT = ("BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL")


def _same(r, expected) -> None:
    assert r.y.dtype == expected.y.dtype == np.int16
    assert np.array_equal(r.y, expected.y)
    assert (r.counters(), r.final_clamped) == (expected.counters(), expected.final_clamped)


def _case(case, data, dtype):
    attrs, inputs = case
    # The LUT (tables from a LutProgram) always runs the reference; compare mode (ALGO 3) too.
    attrs = {**attrs, "EW_LUT_BYPASS": 1}
    if data.draw(st.booleans()):
        attrs["EW_ALU_ALGO"] = data.draw(st.sampled_from([0, 1, 2]))
    regs = SdpRegisters.from_fields(attrs, complete=True)
    x = np.array(inputs["X"], dtype=np.int64).reshape(1, -1)
    if dtype is not None:
        x = np.clip(x, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)
    channel = {n: np.array(inputs[n], np.int16) for n in X_UNIT if n in inputs}
    element = {n: np.array(inputs[n], np.int16).reshape(1, -1) for n in ("EW_ALU", "EW_MUL")
               if n in inputs}  # fmt: skip
    return regs, x, channel, element


@MANY
@given(case=sdp_cases(), data=st.data(), dtype=st.sampled_from([None, np.int8, np.int16]))
def test_fused_pass_equals_sdp(case, data, dtype):
    regs, x, channel, element = _case(case, data, dtype)
    stage = SdpStage(regs, channel)
    ops = {n: v.reshape(1, -1) for n, v in channel.items()}
    expected = sdp(x, regs, operands={**ops, **element})
    _same(stage.run(x, element), expected)
    bound = (int(x.min()), int(x.max()))
    _same(stage.run(x, element, bound=bound), expected)


@MANY
@given(case=sdp_cases(), data=st.data())
def test_fused_pass_on_a_batch_of_planes(case, data):
    regs, x, channel, _ = _case(case, data, None)
    n = x.shape[1]
    planes = np.tile(x.reshape(1, n, 1, 1), (2, 1, 3, 1))
    planes[1] //= 3
    expected = sdp(planes, regs, operands={k: v.reshape(1, n, 1, 1) for k, v in channel.items()})
    _same(SdpStage(regs, channel).run(planes), expected)


def test_the_lowered_passes_of_a_conv_are_fused():
    regs = SdpRegisters(BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_SRC=1, BS_ALU_SHIFT_VALUE=3,
                        BS_RELU_BYPASS=0, CVT_SCALE=21000, CVT_SHIFT=20)  # fmt: skip
    stage = SdpStage(regs, {"BS_ALU": np.array([-300, 5, 32767], np.int16)})
    x = np.random.default_rng(1).integers(-(2**24), 2**24, (2, 3, 5, 5))
    fused = stage._plan.run(x, {}, (-(2**24), 2**24))  # no Fallback
    ops = {"BS_ALU": stage.channel_operands["BS_ALU"].reshape(1, 3, 1, 1)}
    _same(fused, sdp(x, regs, operands=ops))
    assert fused.final_clamped > 0


def test_out_of_range_input_still_raises_through_the_reference():
    stage = SdpStage(SdpRegisters())
    try:
        stage._plan.run(np.array([[1 << 40]]), {}, None)
    except Fallback:
        pass
    else:
        raise AssertionError("expected the fallback")
