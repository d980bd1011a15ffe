"""PDP pooling of FP16 data (``nvdla/fp16/pdp.py``): the vectorised module equals its scalar twin,
the cmod vectors pass (bundled, and live for another seed), and the refusals are clear."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.backends.nvdla.cmod_tools import cmod_tool

from quantemu.backends.nvdla.fp16.pdp import pdp_fp16
from quantemu.backends.nvdla.fp16.reference import pdp_fp16_reference
from quantemu.backends.nvdla.pdp import pdp, pdp_avg, pdp_max
from quantemu.backends.nvdla.registers import PdpRegisters
from quantemu.conformance import bundled_files, collect_files, run_suite
from quantemu.errors import InvalidInputError, UnsupportedError

REPO = Path(__file__).resolve().parents[4]
DATA = REPO / "tests" / "data" / "nvdla_pdp_fp16"
WORDS = (0x0000, 0x8000, 0x0001, 0x83FF, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00)
NANS = (0x7C01, 0x7E00, 0xFD02, 0xFFFF)
FP17 = {1: 0x7C00, 2: 0x7800, 3: 0x7555, 4: 0x7400, 5: 0x7266, 6: 0x7155, 7: 0x7092, 8: 0x7000}


def regs_for(c, h, w, *, method=0, kw=1, kh=1, sw=1, sh=1, pads=(0, 0, 0, 0), **extra):
    pl, pt, pr, pb = pads
    fields = dict(
        INPUT_DATA=2, POOLING_METHOD=method, CUBE_IN_CHANNEL=c - 1, CUBE_OUT_CHANNEL=c - 1,
        CUBE_IN_HEIGHT=h - 1, CUBE_IN_WIDTH=w - 1, KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
        KERNEL_STRIDE_WIDTH=sw - 1, KERNEL_STRIDE_HEIGHT=sh - 1, PAD_LEFT=pl, PAD_TOP=pt,
        PAD_RIGHT=pr, PAD_BOTTOM=pb, CUBE_OUT_WIDTH=(pl + w + pr - kw) // sw,
        CUBE_OUT_HEIGHT=(pt + h + pb - kh) // sh, RECIP_KERNEL_WIDTH=FP17[kw],
        RECIP_KERNEL_HEIGHT=FP17[kh],
    )  # fmt: skip
    return PdpRegisters.from_fields({**fields, **extra})


@st.composite
def layers(draw):
    kw, kh = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    sw, sh = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pads = [draw(st.integers(0, k - 1)) for k in (kw, kh, kw, kh)]
    method = draw(st.integers(0, 2))
    if kw == 8 and method == 0:
        pads[1] = pads[3] = 0  # refused otherwise (the cmod reads past kernel_width_map)
    w = draw(st.integers(max(1, kw - pads[0] - pads[2]), 8))
    h = draw(st.integers(max(1, kh - pads[1] - pads[3]), 8))
    c = draw(st.integers(1, 3))
    fp17 = st.one_of(
        st.sampled_from((0, 0x10000, 0x7C00, 0x17C00, 0xFBFF)), st.integers(0, 0x1FFFF)
    )
    extra = {f"PAD_VALUE_{n}X": draw(st.integers(0, (1 << 19) - 1) | fp17) for n in range(1, 8)}
    extra["RECIP_KERNEL_WIDTH"] = draw(st.just(FP17[kw]) | fp17)
    extra["RECIP_KERNEL_HEIGHT"] = draw(st.just(FP17[kh]) | fp17)
    extra["FLYING_MODE"], extra["NAN_TO_ZERO"] = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    regs = regs_for(c, h, w, method=method, kw=kw, kh=kh, sw=sw, sh=sh, pads=pads, **extra)
    lead = (draw(st.integers(1, 2)),) if draw(st.booleans()) else ()
    word = st.sampled_from(WORDS + NANS) | st.integers(0, 0xFFFF) | st.integers(0x3000, 0x4400)
    shape = (*lead, c, h, w)
    x = draw(st.lists(word, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    x = np.array(x, np.uint16).reshape(shape)
    return regs, x


@settings(max_examples=150, deadline=None)
@given(layers())
def test_vectorised_equals_the_scalar_reference(layer):
    regs, x = layer
    got = pdp_fp16(x, regs)
    assert got.dtype == np.int16
    assert np.array_equal(got, pdp_fp16_reference(x, regs))
    assert np.array_equal(pdp(x.view(np.float16), regs), got)  # dispatch, float16 input


def test_known_values():
    # 1x1 average with RECIP 1.0: finite words unchanged (-0 and subnormals too), Inf -> fp17
    # maximum -> saturated to +-65504; max/min of +-0 order -0 < +0; a NaN operand wins.
    x = np.array([0x0000, 0x8000, 0x0001, 0x83FF, 0x3C00, 0x7C00, 0xFC00], np.uint16)
    y = pdp_avg(x.reshape(1, 1, 7), regs_for(1, 1, 7)).view(np.uint16).ravel()
    assert [hex(v) for v in y] == ["0x0", "0x8000", "0x1", "0x83ff", "0x3c00", "0x7bff", "0xfbff"]
    pair = np.array([[[0x8000, 0x0000]], [[0x7E01, 0x3C00]]], np.uint16)
    y = pdp_max(pair, regs_for(2, 1, 2, method=1, kw=2)).view(np.uint16).ravel()
    assert [hex(v) for v in y] == ["0x0", "0x7e01"]
    # mean of 2x2 ones with the 1/2 reciprocals; a pad column of PAD_VALUE_1X = fp17 2.0
    ones = np.full((1, 2, 2), 1.0, np.float16)
    assert pdp(ones, regs_for(1, 2, 2, kw=2, kh=2)).view(np.float16).item() == 1.0
    r = regs_for(1, 2, 2, kw=2, kh=2, pads=(1, 0, 0, 0), PAD_VALUE_1X=0x8000)
    assert pdp(ones, r).view(np.float16).ravel().tolist() == [1.5, 1.0]


def test_nan_flush_needs_off_flying_mode_and_nan_to_zero():
    x = np.array([[[0x7E01, 0xFD02, 0x3C00]]], np.uint16)
    for fly, n2z, want in ((1, 1, [0, 0, 0x3C00]), (0, 1, [0x7E01, 0xFD02, 0x3C00])):
        r = regs_for(1, 1, 3, method=1, FLYING_MODE=fly, NAN_TO_ZERO=n2z)
        assert pdp(x, r).view(np.uint16).ravel().tolist() == want


def test_registers_take_fp16_and_3_is_reserved():
    assert PdpRegisters(INPUT_DATA=2).input_type.name == "FP16"
    with pytest.raises(InvalidInputError, match="INPUT_DATA = 3 is a reserved encoding"):
        PdpRegisters(INPUT_DATA=3)


def test_bad_input_and_refused_kernel_width_8_with_top_or_bottom_padding():
    r = regs_for(1, 2, 2, kw=2, kh=2)
    for bad in (np.zeros((1, 2, 2), np.int16), np.zeros((1, 2, 2), np.float32)):
        with pytest.raises(InvalidInputError, match="float16 array"):
            pdp(bad, r)
    with pytest.raises(InvalidInputError, match=r"shape \(C, H, W\)"):
        pdp(np.zeros((1, 3, 2), np.float16), r)
    with pytest.raises(InvalidInputError, match="pad_values_fp17"):
        r.pad_values()
    x = np.zeros((1, 3, 8), np.float16)
    refused = regs_for(1, 3, 8, kw=8, kh=2, pads=(0, 1, 0, 0))
    for fn in (pdp, pdp_fp16_reference):
        with pytest.raises(UnsupportedError, match=r"kernel_width_map\[8\].*out-of-bounds"):
            fn(x, refused)
    # max/min never use the product; no top/bottom padding means no out-of-bounds value used
    pdp(x, regs_for(1, 3, 8, method=1, kw=8, kh=2, pads=(0, 1, 0, 0)))
    pdp(x, regs_for(1, 3, 8, kw=8, kh=2, pads=(3, 0, 2, 0)))


def test_the_committed_cmod_vectors_pass_and_are_bundled():
    totals = run_suite(collect_files([DATA])).totals()
    assert totals.total == 150 and totals.passed == 150
    files = [vf for vf in bundled_files() if "nvdla-fp16/pdp_" in vf.display]
    assert len(files) == 3
    totals = run_suite(files).totals()
    assert totals.total == 150 and totals.passed == 150


@pytest.mark.peer
def test_fresh_cmod_pdp_fp16_vectors_pass(tmp_path):
    """NVIDIA's cmod PDP, live, for another seed. Skipped without g++ or the nvdla/hw sources
    (``QUANTEMU_NVDLA_HW``: a checkout or mirror of https://github.com/nvdla/hw)."""
    tool = cmod_tool("make_nvdla_pdp_fp16_vectors", "PDP")
    try:
        exe = tool.build(out_dir=tmp_path / "build")
    except tool.CmodUnavailable as exc:  # e.g. a mirror without the commit
        pytest.skip(f"the cmod could not be built here: {exc}")
    for op, records in tool.generate(11, 20, exe).items():
        tool.write_jsonl_gz(records, tmp_path / "out" / f"{op}.jsonl.gz")
    totals = run_suite(collect_files([tmp_path / "out"])).totals()
    assert totals.total == 60 and totals.passed == 60
