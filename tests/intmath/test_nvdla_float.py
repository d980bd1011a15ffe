"""The vectorised NVDLA cmod floating point against its scalar transcription, ``==`` on bit
patterns, on boundary-biased inputs (exhaustively where the domain is small)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import quantemu.intmath.nvdla_float as V
import quantemu.intmath.reference_nvdla_float as R

EXPONENTS = [0, 1, 2, 100, 126, 127, 128, 200, 253, 254, 255]
MANTISSAS = [0, 1, 2, 1 << 22, (1 << 23) - 1]


def _word(fields):
    sign, expo, mant = fields
    return (sign << 31) | (expo << 23) | mant


FP32 = st.one_of(
    st.integers(0, 2**32 - 1),
    st.tuples(
        st.integers(0, 1),
        st.one_of(st.sampled_from(EXPONENTS), st.integers(0, 255)),
        st.one_of(st.sampled_from(MANTISSAS), st.integers(0, 2**23 - 1)),
    ).map(_word),
)


@st.composite
def fp32_pairs(draw):
    """Pairs of fp32 words; half of them with close bit patterns (cancellation, near ties)."""
    a = draw(FP32)
    b = draw(st.one_of(FP32, st.integers(-(2**25), 2**25).map(lambda d: (a + d) % 2**32)))
    return a, b


FP17 = st.tuples(
    st.integers(0, 1),
    st.one_of(st.sampled_from([0, 1, 30, 31, 32, 61, 62, 63]), st.integers(0, 63)),
    st.one_of(st.sampled_from([0, 1, 512, 1023]), st.integers(0, 1023)),
).map(lambda f: (f[0] << 16) | (f[1] << 10) | f[2])


def _same(vector, scalar, *columns):
    got = vector(*(np.array(c, dtype=np.int64) for c in columns))
    got = (
        list(zip(*(g.tolist() for g in got), strict=True))
        if isinstance(got, tuple)
        else got.tolist()
    )
    want = [scalar(*row) for row in zip(*columns, strict=True)]
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.lists(fp32_pairs(), min_size=1, max_size=32))
def test_fp32_binary_operations(pairs):
    a, b = zip(*pairs, strict=True)
    _same(V.fp32_add_rne_nvdla, lambda x, y: R.fp_add(x, y, R.FP32), a, b)
    _same(V.fp32_sub_rne_nvdla, lambda x, y: R.fp_sub(x, y, R.FP32), a, b)
    _same(V.fp32_mul_rne_nvdla, lambda x, y: R.fp_mul(x, y, R.FP32), a, b)
    _same(V.fp32_max_nvdla, lambda x, y: R.fp_cmp(x, y, R.FP32, maximum=True), a, b)
    _same(V.fp32_min_nvdla, lambda x, y: R.fp_cmp(x, y, R.FP32, maximum=False), a, b)
    _same(V.fp32_eql_nvdla, lambda x, y: int(x == y), a, b)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FP17, FP17), min_size=1, max_size=32))
def test_fp17_binary_operations(pairs):
    a, b = zip(*pairs, strict=True)
    _same(V.fp17_add_rne_nvdla, lambda x, y: R.fp_add(x, y, R.FP17), a, b)
    _same(V.fp17_mul_rne_nvdla, lambda x, y: R.fp_mul(x, y, R.FP17), a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(FP32, min_size=1, max_size=32), st.lists(st.integers(-128, 127), min_size=32,
                                                          max_size=32))  # fmt: skip
def test_fp32_unary_operations(words, shifts):
    _same(V.fp32_relu_nvdla, lambda x: R.fp_relu(x, R.FP32), words)
    _same(V.fp32_to_fp16_rne_sat_nvdla, R.fp32_to_fp16, words)
    _same(V.fp32_to_fp17_rne_sat_nvdla, R.fp32_to_fp17, words)
    _same(V.fp32_to_int_frac_nvdla, R.fp32_to_int_frac, words, shifts[: len(words)])


def test_every_fp16_and_fp17_word_and_int17_value():
    h = list(range(1 << 16))
    _same(V.fp16_to_fp32_nvdla, R.fp16_to_fp32, h)
    _same(V.fp16_to_fp17_nvdla, R.fp16_to_fp17, h)
    _same(V.fp16_to_int16_round_half_away_sat_nvdla, R.fp16_to_int16, h)
    _same(V.fp17_to_fp32_nvdla, R.fp17_to_fp32, list(range(1 << 17)))
    _same(V.int17_to_fp16_rne_sat_nvdla, R.int17_to_fp16, list(range(-(1 << 16), 1 << 16)))


FRACTIONS = st.one_of(
    st.integers(0, 2**35 - 1),
    st.integers(0, 34).map(lambda k: 1 << k),
    st.integers(1, 34).map(lambda k: (1 << k) - 1),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(FRACTIONS, min_size=1, max_size=32))
def test_lut_fraction_to_fp17(fracs):
    _same(V.fraction_to_fp17_nvdla, R.fraction_to_fp17, fracs)


def test_the_cmod_edge_rules_the_readme_lists():
    """Spot values from conformance/nvdla-fp16/README.md."""
    h = np.array([0x7C00, 0x7E00], np.uint16)
    assert [hex(v) for v in V.fp16_to_fp32_nvdla(h)] == ["0x7f7fffff", "0x7f800200"]
    f = np.array([0x7F800000, 0x7FC00000, 0x33000000, 0x00000001], np.uint32)
    assert [hex(v) for v in V.fp32_to_fp16_rne_sat_nvdla(f)] == ["0x7bff", "0x7c00", "0x0", "0x0"]
    inf, neg_inf = np.uint32(0x7F800000), np.uint32(0xFF800000)
    assert V.fp32_add_rne_nvdla(inf, neg_inf) == 0  # Inf - Inf = 0: exponent 255 is ordinary
    assert V.fp32_mul_rne_nvdla(np.uint32(0), inf) == 0
    nan = np.uint32(0xFFC00123)
    assert V.fp32_mul_rne_nvdla(nan, np.uint32(0)) == nan  # NaN x 0: the NaN, sign kept
    half = np.array([0x3800, 0x4100, 0xB800], np.uint16)  # 0.5, 2.5, -0.5
    assert V.fp16_to_int16_round_half_away_sat_nvdla(half).tolist() == [1, 3, -1]


def test_the_pdp_and_cdp_primitives_against_their_references():
    x17 = list(range(1 << 17))
    _same(V.fp17_to_fp16_rne_sat_nvdla, R.fp17_to_fp16, x17)
    _same(lambda f: V.fraction_to_fp17_nvdla(f, 16), lambda f: R.fraction_to_fp17(f, 16),
          list(range(1 << 16)))  # fmt: skip
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 16, 20000)
    b = np.where(rng.random(20000) < 0.5, rng.integers(0, 1 << 16, 20000), (a + 1) % 65536)
    _same(
        V.fp16_max_nvdla, lambda x, y: R.fp_cmp(x, y, R.FP16, maximum=True), a.tolist(), b.tolist()
    )
    _same(
        V.fp16_min_nvdla, lambda x, y: R.fp_cmp(x, y, R.FP16, maximum=False), a.tolist(), b.tolist()
    )
