"""Direct convolution in FP16 through CMAC + CACC (``nvdla/fp16/cc.py``): the vectorised module
equals its scalar twin, the cmod vectors pass (bundled, and live for another seed), and the
refusals are clear."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backends.nvdla.cmod_tools import cmod_tool

from quantemu.backends.nvdla.fp16 import reference as ref
from quantemu.backends.nvdla.fp16.cc import (
    booth_fp16,
    cacc_add_fp16,
    cacc_fp48_to_fp32,
    cmac_cell_fp16,
    conv_fp16,
    conv_fp16_grouped,
)
from quantemu.conformance import bundled_files, collect_files, run_suite
from quantemu.errors import InvalidInputError

REPO = Path(__file__).resolve().parents[4]
DATA = REPO / "tests" / "data" / "nvdla_conv_fp16"
SPECIALS = (0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00)
NANS = (0x7C01, 0x7E00, 0xFD02, 0xFFFF, 0x7D55)

words = st.one_of(
    st.sampled_from(SPECIALS + NANS),
    st.integers(0, 0xFFFF),
    st.integers(0x3000, 0x4800),  # near 1: long cancellations
    st.integers(0, 0x3FF),  # subnormals
)


def _conv_reference(x, w, geometry) -> np.ndarray:
    y = conv_fp16(x, w, **geometry)  # only for the shape; every word is recomputed below
    xl, wl = x.astype(int).tolist(), w.astype(int).tolist()
    g = dict(geometry)
    g["stride"], g["dilation"] = (g["stride"],) * 2, (g["dilation"],) * 2
    g["padding"] = (g["padding"],) * 4
    out = [ref.conv_output(xl, wl, idx, g) for idx in np.ndindex(*y.shape)]
    return np.array(out, np.uint32).reshape(y.shape)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.tuples(st.integers(1, 140), st.integers(1, 17), st.integers(1, 3)))
def test_conv_equals_the_scalar_reference(data, sizes):
    c, k, r = sizes
    stride, pad = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 1))
    h, w_ = data.draw(st.integers(r, 4)), data.draw(st.integers(1, 3))
    wide = data.draw(st.booleans())  # exponents far apart: block shifts of 32 and more
    x = np.array(data.draw(st.lists(words, min_size=c * h * w_, max_size=c * h * w_)), np.uint16)
    wt = np.array(data.draw(st.lists(words, min_size=k * c * r, max_size=k * c * r)), np.uint16)
    if wide:
        x[::3] = 0x7800 | (x[::3] & 0x3FF)
    geometry = dict(stride=stride, dilation=1, padding=pad, pad_value=data.draw(words))
    x, wt = x.reshape(c, h, w_), wt.reshape(k, c, r, 1)
    assert np.array_equal(conv_fp16(x, wt, **geometry), _conv_reference(x, wt, geometry))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(words, words), min_size=64, max_size=64))
def test_one_atomic_op_equals_the_scalar_cell(pairs):
    dat, wt = [p[0] for p in pairs], [p[1] for p in pairs]
    got = cmac_cell_fp16(np.array([dat]), np.array([wt]))[0, 0]
    assert int(got) == ref.cmac_cell(dat, wt)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1))
def test_booth_is_exact_without_shift_and_matches_the_port(sign, wm, dm):
    assert int(booth_fp16(sign, wm, dm, 0)) == (-(wm * dm) if sign else wm * dm)
    for sft in range(0, 60, 4):
        assert int(booth_fp16(sign, wm, dm, sft)) == ref.booth(sign, wm, dm, sft)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.tuples(st.integers(1, 5), st.integers(1, 70), st.integers(1, 3)))
def test_grouped_conv_equals_one_conv_per_group(data, sizes):
    groups, cg, kg = sizes
    c, k = groups * cg, groups * kg
    h, w_ = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    r, s = data.draw(st.integers(1, min(h, 3))), data.draw(st.integers(1, min(w_, 2)))
    x = np.array(data.draw(st.lists(words, min_size=c * h * w_, max_size=c * h * w_)), np.uint16)
    n = k * cg * r * s
    wt = np.array(data.draw(st.lists(words, min_size=n, max_size=n)), np.uint16)
    if data.draw(st.booleans()):  # ReLU-like data: many +-0 channels
        x[x >= 0x8000] = 0
    geometry = dict(stride=data.draw(st.integers(1, 2)), padding=data.draw(st.integers(0, 1)))
    geometry["pad_value"] = data.draw(words)
    x, wt = x.reshape(c, h, w_), wt.reshape(k, cg, r, s)
    got = conv_fp16_grouped(x, wt, groups=groups, **geometry)
    one_by_one = [
        conv_fp16(x[g * cg : (g + 1) * cg], wt[g * kg : (g + 1) * kg], **geometry)
        for g in range(groups)
    ]
    assert got.dtype == np.uint32 and np.array_equal(got, np.concatenate(one_by_one))
    if groups == 1:
        assert np.array_equal(got, conv_fp16(x, wt, **geometry))


def test_depthwise_conv_is_one_call_and_matches_the_reference():
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((6, 3, 3)), -0.2).astype(np.float16)
    w = rng.standard_normal((12, 1, 2, 2)).astype(np.float16)  # multiplier 2
    got = conv_fp16_grouped(x, w, groups=6, padding=1, pad_value=0x3C00)
    geometry = dict(stride=1, dilation=1, padding=1, pad_value=0x3C00)
    xs, ws = x.view(np.uint16), w.view(np.uint16)
    want = [_conv_reference(xs[g // 2 : g // 2 + 1], ws[g : g + 1], geometry) for g in range(12)]
    assert np.array_equal(got, np.concatenate(want))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(words, words), min_size=3 * 5, max_size=3 * 5))
def test_atomic_ops_batch_over_leading_dims(pairs):
    dat = np.array([p[0] for p in pairs]).reshape(3, 5, 1)
    wt = np.array([p[1] for p in pairs]).reshape(3, 1, 5)
    dat, wt = np.broadcast_to(dat, (3, 5, 5)), np.broadcast_to(wt.transpose(0, 2, 1), (3, 5, 5))
    got = cmac_cell_fp16(dat, wt)
    assert got.shape == (3, 5, 5)
    for g in range(3):
        assert np.array_equal(got[g], cmac_cell_fp16(dat[g], wt[g]))
        assert int(got[g, 1, 2]) == ref.cmac_cell(dat[g, 2].tolist(), wt[g, 1].tolist())


fp48 = st.one_of(
    st.integers(0, (1 << 48) - 1),
    st.builds(lambda e, m: e << 40 | (m & ((1 << 40) - 1)), st.integers(0, 255),
              st.integers(-(1 << 39), (1 << 39) - 1)),
)  # fmt: skip
mac44 = st.one_of(
    st.integers(0, (1 << 44) - 1),
    st.builds(lambda e, m: e << 38 | (m & ((1 << 38) - 1)), st.integers(0, 63),
              st.integers(-2000, 2000)),
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(fp48, mac44)
def test_cacc_add_and_output_equal_the_scalar_ones(accu, mac):
    assert int(cacc_add_fp16(accu, mac)) == ref.cacc_add(accu, mac)
    assert int(cacc_fp48_to_fp32(accu)) == ref.fp48_to_fp32(accu)


def test_cancellation_with_truncation_and_special_rules():
    one, nan = np.float16(1), 0x7E05
    x = np.array([1.0, 2.0**-24], np.float16).reshape(2, 1, 1)
    w = np.array([1.0, 2.0**-24], np.float16).reshape(1, 2, 1, 1)
    assert conv_fp16(x, w)[0, 0, 0] == 0x3F800000  # the tiny product is shifted out (>= 32)
    inf = np.array([np.inf], np.float16).reshape(1, 1, 1)
    assert conv_fp16(inf, np.full((1, 1, 1, 1), one)).view(np.float32)[0, 0, 0] == 65536.0
    xw = np.array([nan, 0x3C00], np.uint16).reshape(2, 1, 1)
    zero_w = np.zeros((1, 2, 1, 1), np.uint16)
    assert conv_fp16(xw, zero_w)[0, 0, 0] == 0x7F800205  # NaN * 0 is NaN, payload in bits 9..0
    xc = np.array([3.0, 3.0], np.float16).reshape(2, 1, 1)
    wc = np.array([1.0, -1.0], np.float16).reshape(1, 2, 1, 1)
    assert conv_fp16(xc, wc)[0, 0, 0] == 0


def test_refusals_name_the_value():
    x, w = np.zeros((2, 3, 3), np.float16), np.zeros((1, 2, 2, 2), np.float16)
    with pytest.raises(InvalidInputError, match="same C"):
        conv_fp16(x, np.zeros((1, 3, 2, 2), np.float16))
    with pytest.raises(InvalidInputError, match="float16"):
        conv_fp16(x.astype(np.float32), w)
    with pytest.raises(InvalidInputError, match="does not fit"):
        conv_fp16(x, w, dilation=3)
    with pytest.raises(InvalidInputError, match="stride"):
        conv_fp16(x, w, stride=0)
    with pytest.raises(InvalidInputError, match="padding"):
        conv_fp16(x, w, padding=(1, 2))
    with pytest.raises(InvalidInputError, match="pad_value"):
        conv_fp16(x, w, pad_value=70000)
    with pytest.raises(InvalidInputError, match="groups = 3 must divide C = 2"):
        conv_fp16_grouped(x, w, groups=3)
    with pytest.raises(InvalidInputError, match="must have 1 channels"):
        conv_fp16_grouped(x, w, groups=2)
    with pytest.raises(InvalidInputError, match="groups must be an int"):
        conv_fp16_grouped(x, w, groups=0)


def test_the_committed_cmod_vectors_pass_and_are_bundled():
    totals = run_suite(collect_files([DATA])).totals()
    assert totals.total == 40 and totals.passed == 40
    files = [vf for vf in bundled_files() if "nvdla-fp16/conv_fp16" in vf.display]
    assert len(files) == 1
    totals = run_suite(files).totals()
    assert totals.total == 40 and totals.passed == 40


@pytest.mark.peer
def test_fresh_cmod_conv_fp16_vectors_pass(tmp_path):
    """NVIDIA's cmod CMAC + CACC, live, for another seed. Skipped without g++, SystemC (or
    apt-get to fetch it) or the nvdla/hw sources (``QUANTEMU_NVDLA_HW``)."""
    tool = cmod_tool("make_nvdla_conv_fp16_vectors", "CMAC/CACC")
    try:
        exe = tool.build(out_dir=tmp_path / "build")
    except (tool.CmodUnavailable, OSError) as exc:  # no SystemC, a mirror without the commit
        pytest.skip(f"the cmod could not be built here: {exc}")
    tool.write_jsonl_gz(tool.generate(13, 20, exe), tmp_path / "out" / "conv_fp16.jsonl.gz")
    totals = run_suite(collect_files([tmp_path / "out"])).totals()
    assert totals.total == 20 and totals.passed == 20


def test_a_batch_is_each_sample_on_its_own():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 6, 5, 4)) * 3).astype(np.float16)
    x[1, :, 2] = 0  # zero rows: the CMAC skips them in one sample only
    w = (rng.standard_normal((4, 3, 3, 2)) * 0.5).astype(np.float16)
    got = conv_fp16_grouped(x, w, groups=2, stride=(2, 1), padding=(1, 0, 1, 2))
    for n in range(3):
        one = conv_fp16_grouped(x[n], w, groups=2, stride=(2, 1), padding=(1, 0, 1, 2))
        np.testing.assert_array_equal(got[n], one)
