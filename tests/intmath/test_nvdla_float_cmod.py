"""``quantemu.intmath.nvdla_float`` against NVIDIA's NVDLA cmod itself, bit for bit.

The cmod's ``nvdla_float.h`` (nvdla/hw ``nvdlav1`` @ ``8e06b1b9``) is compiled once per session by
``tools/nvdla_cmod_fp.py`` and called through ctypes; every function of the port is compared with
it by ``==`` on bit patterns (``.tolist()``). The unary fp16 functions, ``Fp17ToFp32`` and
``Int17ToFp16`` are checked exhaustively, ``FpFloatToIntFrac`` over every right shift of its 8-bit
signed register; the rest on boundary-biased hypothesis draws: exponent fields at 0, 1, 2, around
the bias and the top, NaNs with payloads, pairs with equal or close exponents (cancellation),
sums and products that land exactly on half an ulp, exponent sums at the edges of the product's
range, words whose dropped bits are a rounding tie for the narrowing conversions.

The module skips when g++ or the nvdla/hw sources are missing (``QUANTEMU_NVDLA_HW``: a checkout
or a bare mirror of https://github.com/nvdla/hw; default ``/work/.mirror/nvdla+hw/repo``), and each
test skips while the port lacks its function.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.peer

ROOT = Path(__file__).resolve().parents[2]
PORT = "quantemu.intmath.nvdla_float"
SETTINGS = settings(max_examples=300, deadline=None)


def _load_tool():
    spec = importlib.util.spec_from_file_location("nvdla_cmod_fp", ROOT / "tools/nvdla_cmod_fp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _load_tool()
_REASON = TOOL.unavailable_reason()
if _REASON is not None:
    pytest.skip(f"NVDLA cmod unavailable: {_REASON}", allow_module_level=True)


@pytest.fixture(scope="module")
def cmod(tmp_path_factory):
    """The cmod primitives (:class:`tools.nvdla_cmod_fp.CmodFp`), built once for this module."""
    try:
        path = TOOL.build(out_dir=tmp_path_factory.mktemp("nvdla_cmod_fp"))
    except TOOL.CmodUnavailable as exc:
        pytest.skip(f"NVDLA cmod unavailable: {exc}")
    return TOOL.load(path)


def port(name: str):
    """The port's function ``name``; skips while the port or the function does not exist."""
    if importlib.util.find_spec(PORT) is None:
        pytest.skip(f"{PORT} does not exist yet (the NumPy port is in progress)")
    fn = getattr(importlib.import_module(PORT), name, None)
    if fn is None:
        pytest.skip(f"{PORT} has no {name} yet")
    return fn


# --- comparing -----------------------------------------------------------------------------------


def _show(v: int, dtype: np.dtype) -> str:
    if np.dtype(dtype).kind == "u":
        return f"0x{v:0{np.dtype(dtype).itemsize * 2}x}"
    return str(v)


def assert_same(name: str, want, got, **inputs) -> None:
    """``got.tolist() == want.tolist()``; on a difference, list the first inputs that differ."""
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, f"{name}: shape {got.shape}, the cmod's {want.shape}"
    if got.tolist() != want.tolist():
        flat_w, flat_g = want.ravel().tolist(), got.ravel().tolist()
        bad = [i for i, (w, g) in enumerate(zip(flat_w, flat_g, strict=True)) if w != g]
        ins = {k: np.broadcast_to(np.asarray(v), want.shape).ravel() for k, v in inputs.items()}
        lines = [
            ", ".join(f"{k}={_show(int(a[i]), a.dtype)}" for k, a in ins.items())
            + f": cmod {_show(flat_w[i], want.dtype)}, port {_show(flat_g[i], want.dtype)}"
            for i in bad[:8]
        ]
        pytest.fail(f"{name}: {len(bad)} of {want.size} differ\n  " + "\n  ".join(lines))
    assert got.dtype == want.dtype, f"{name} returns {got.dtype}, expected {want.dtype}"


# --- strategies -----------------------------------------------------------------------------------


class Fmt:
    """A cmod float format: ``expo`` exponent and ``mant`` mantissa bits, a sign bit on top."""

    def __init__(self, expo: int, mant: int):
        self.expo, self.mant = expo, mant
        self.width = 1 + expo + mant
        self.bias = (1 << (expo - 1)) - 1
        self.emax = (1 << expo) - 1
        self.mmask = (1 << mant) - 1

    def pack(self, sign: int, expo: int, mant: int) -> int:
        return (sign << (self.expo + self.mant)) | (expo << self.mant) | mant

    def special_exponents(self) -> list[int]:
        b, t = self.bias, self.emax
        return [0, 1, 2, b - 1, b, b + 1, t - 2, t - 1, t]

    def special_mantissas(self) -> list[int]:
        m = self.mant
        return [0, 1, 2, 1 << (m - 1), (1 << (m - 1)) + 1, self.mmask - 1, self.mmask]


FP32, FP17 = Fmt(8, 23), Fmt(6, 10)
SIGNS = st.sampled_from([0, 1])


def exponents(fmt: Fmt, extra: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    return st.sampled_from(fmt.special_exponents() + list(extra)) | st.integers(0, fmt.emax)


def mantissas(fmt: Fmt) -> st.SearchStrategy[int]:
    return st.sampled_from(fmt.special_mantissas()) | st.integers(0, fmt.mmask)


def nans(fmt: Fmt) -> st.SearchStrategy[int]:
    """NaNs of both signs with payloads, quiet bit set or not."""
    payload = st.sampled_from([1, 2, 1 << (fmt.mant - 1), (1 << (fmt.mant - 1)) | 1, fmt.mmask])
    return st.builds(fmt.pack, SIGNS, st.just(fmt.emax), payload | st.integers(1, fmt.mmask))


def words(fmt: Fmt, extra_exponents: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    """Random words, words from chosen fields, and NaNs."""
    return st.one_of(
        st.integers(0, (1 << fmt.width) - 1),
        st.builds(fmt.pack, SIGNS, exponents(fmt, extra_exponents), mantissas(fmt)),
        nans(fmt),
    )


@st.composite
def tie_words(draw, fmt: Fmt, exps: list[int]) -> int:
    """Words whose low ``k`` mantissa bits are ``10..0`` (a tie when ``k`` bits are dropped) or
    one off it, with the exponent among ``exps`` (the target format's range edges)."""
    k = draw(st.integers(1, fmt.mant))
    half = 1 << (k - 1)
    low = draw(st.sampled_from([half, half - 1, half + 1]))
    high = draw(st.integers(0, fmt.mmask >> k))
    expo = draw(st.sampled_from(exps) | st.integers(min(exps), max(exps)))
    return fmt.pack(draw(SIGNS), expo, ((high << k) | low) & fmt.mmask)


@st.composite
def close_pairs(draw, fmt: Fmt) -> tuple[int, int]:
    """Equal or close exponents, mantissas equal or near: cancellation in add/sub."""
    e1 = draw(exponents(fmt))
    d = draw(st.integers(-2, 2) | st.integers(-(fmt.mant + 4), fmt.mant + 4))
    e2 = min(max(e1 + d, 0), fmt.emax)
    m1 = draw(mantissas(fmt))
    m2 = draw(mantissas(fmt) | st.integers(-3, 3).map(lambda dm: min(max(m1 + dm, 0), fmt.mmask)))
    return fmt.pack(draw(SIGNS), e1, m1), fmt.pack(draw(SIGNS), e2, m2)


@st.composite
def add_tie_pairs(draw, fmt: Fmt) -> tuple[int, int]:
    """``b`` is ``d`` binades below ``a`` and its bits shifted out by the alignment are ``10..0``
    (or one off): the exact sum or difference sits on (or next to) half an ulp."""
    m = fmt.mant
    d = draw(st.integers(1, m + 3))
    ea = draw(st.integers(d, fmt.emax))
    if d <= m:
        half = 1 << (d - 1)
        low = draw(st.sampled_from([half, half - 1, half + 1]))
        mb = ((draw(st.integers(0, fmt.mmask >> d)) << d) | low) & fmt.mmask
    else:
        mb = draw(st.sampled_from([0, 1, fmt.mmask]) | st.integers(0, fmt.mmask))
    a = fmt.pack(draw(SIGNS), ea, draw(mantissas(fmt)))
    b = fmt.pack(draw(SIGNS), ea - d, mb)
    return (a, b) if draw(st.booleans()) else (b, a)


@st.composite
def mul_tie_pairs(draw, fmt: Fmt) -> tuple[int, int]:
    """Significands whose product's lowest set bit is bit ``M-1`` or ``M``: the product is an exact
    tie of the rounding to ``M+1`` bits whenever that bit is the last one dropped."""
    m = fmt.mant
    target = draw(st.sampled_from([m - 1, m]))
    ta = draw(st.integers(0, target))

    def with_lowest_bit(t: int) -> int:  # a mantissa whose significand 1.m has its lowest 1 at t
        if t >= m:
            return 0
        return (((draw(st.integers(0, (1 << (m - t - 1)) - 1)) << 1) | 1) << t) & fmt.mmask

    total = fmt.bias + draw(st.integers(1, fmt.emax - 1))  # a normal product exponent
    ea = draw(st.integers(max(0, total - fmt.emax), min(fmt.emax, total)))
    a = fmt.pack(draw(SIGNS), ea, with_lowest_bit(ta))
    b = fmt.pack(draw(SIGNS), total - ea, with_lowest_bit(target - ta))
    return a, b


@st.composite
def mul_range_pairs(draw, fmt: Fmt) -> tuple[int, int]:
    """Exponent sums at the product's underflow and overflow edges."""
    b, t = fmt.bias, fmt.emax
    total = draw(st.sampled_from([b - 2, b - 1, b, b + 1, t + b - 3, t + b - 2, t + b - 1, t + b]))
    ea = draw(st.integers(max(0, total - t), min(t, total)))
    return (
        fmt.pack(draw(SIGNS), ea, draw(mantissas(fmt))),
        fmt.pack(draw(SIGNS), total - ea, draw(mantissas(fmt))),
    )


@st.composite
def related_pairs(draw, fmt: Fmt) -> tuple[int, int]:
    """``(a, a)``, ``(a, -a)``, ``(a, a ± 1 ulp)``, ``±0``, and a NaN against anything."""
    a = draw(words(fmt))
    sign_bit = 1 << (fmt.width - 1)
    kind = draw(st.sampled_from(["same", "negated", "ulp", "zeros", "nan"]))
    if kind == "same":
        return a, a
    if kind == "negated":
        return a, a ^ sign_bit
    if kind == "ulp":
        return a, min(max(a + draw(st.sampled_from([-1, 1])), 0), (1 << fmt.width) - 1)
    if kind == "zeros":
        return draw(st.sampled_from([0, sign_bit])), draw(st.sampled_from([0, sign_bit]))
    pair = (draw(nans(fmt)), a)
    return pair if draw(st.booleans()) else pair[::-1]


def pairs(fmt: Fmt) -> st.SearchStrategy[tuple[int, int]]:
    return st.one_of(
        st.tuples(words(fmt), words(fmt)),
        close_pairs(fmt),
        add_tie_pairs(fmt),
        mul_tie_pairs(fmt),
        mul_range_pairs(fmt),
        related_pairs(fmt),
    )


def pair_arrays(fmt: Fmt) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    def to_arrays(ps):
        a, b = zip(*ps, strict=True)
        return np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)

    return st.lists(pairs(fmt), min_size=1, max_size=48).map(to_arrays)


def word_arrays(strategy: st.SearchStrategy[int]) -> st.SearchStrategy[np.ndarray]:
    return st.lists(strategy, min_size=1, max_size=64).map(lambda v: np.array(v, dtype=np.uint32))


# Exponent fields of fp32 at the edges of fp16 (bias 15: normal 113..142, denormal 102..112,
# zero below) and fp17 (bias 31, no denormals: normal 97..158, zero or 2^-30 below).
FP16_EDGES = [0, 1, 101, 102, 103, 111, 112, 113, 114, 141, 142, 143, 144, 254, 255]
FP17_EDGES = [0, 1, 85, 86, 87, 95, 96, 97, 98, 157, 158, 159, 160, 254, 255]
ALL_FP16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


# --- exhaustive ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("fp16_to_fp32_nvdla", "fp16_to_fp32_nvdla"),
        ("fp16_to_fp17_nvdla", "fp16_to_fp17_nvdla"),
        ("fp16_to_int16_round_half_away_sat_nvdla", "fp16_to_int16_round_half_away_sat_nvdla"),
    ],
)
def test_fp16_unary_all_patterns(cmod, name, method):
    fn = port(name)
    assert_same(name, getattr(cmod, method)(ALL_FP16), fn(ALL_FP16), h=ALL_FP16)


def test_fp17_to_fp32_all_patterns(cmod):
    fn = port("fp17_to_fp32_nvdla")
    x = np.arange(1 << 17, dtype=np.uint32)
    assert_same("fp17_to_fp32_nvdla", cmod.fp17_to_fp32_nvdla(x), fn(x), x=x)


def test_int17_to_fp16_whole_range(cmod):
    fn = port("int17_to_fp16_rne_sat_nvdla")
    v = np.arange(-(1 << 16), 1 << 16, dtype=np.int64)
    assert_same("int17_to_fp16_rne_sat_nvdla", cmod.int17_to_fp16_rne_sat_nvdla(v), fn(v), v=v)


@pytest.mark.parametrize(
    ("name", "edges"),
    [("fp32_to_fp16_rne_sat_nvdla", FP16_EDGES), ("fp32_to_fp17_rne_sat_nvdla", FP17_EDGES)],
)
def test_fp32_narrowing_sweep(cmod, name, edges):
    """Every sign, every exponent within 3 of an edge of the target format, every pattern of the
    mantissa's top 10 bits, and below them exactly a tie, one off it, zero, or all ones."""
    fn = port(name)
    expos = sorted({e + d for e in edges for d in range(-3, 4) if 0 <= e + d <= 255})
    low = [0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF]
    s, e, top, lo = np.meshgrid([0, 1], expos, np.arange(1024), low, indexing="ij", sparse=True)
    f = ((s << 31) | (e << 23) | (top << 13) | lo).astype(np.uint32).ravel()
    assert_same(name, getattr(cmod, name)(f), fn(f), f=f)


def test_fraction_to_fp17_sweep(cmod):
    """Small fractions (the zero cut-off), the top of the range (rounding up to 1.0), and every
    ``2^k``, ``2^k ± 1``, ``2^k ± 2^(k-11)``: rounding ties and carries."""
    fn = port("fraction_to_fp17_nvdla")
    top = (1 << 35) - 1
    vals = {*range(4096), *range(top - 4095, top + 1)}
    for k in range(35):
        for d in (0, 1, -1, 1 << max(k - 11, 0), -(1 << max(k - 11, 0))):
            vals.add(min(max((1 << k) + d, 0), top))
    frac = np.array(sorted(vals), dtype=np.uint64)
    assert_same("fraction_to_fp17_nvdla", cmod.fraction_to_fp17_nvdla(frac), fn(frac), frac=frac)


# --- fp32 and fp17 arithmetic ---------------------------------------------------------------------


BINARY_FP32 = [
    "fp32_add_rne_nvdla",
    "fp32_sub_rne_nvdla",
    "fp32_mul_rne_nvdla",
    "fp32_max_nvdla",
    "fp32_min_nvdla",
    "fp32_eql_nvdla",
]


@pytest.mark.parametrize("name", BINARY_FP32)
@SETTINGS
@given(ab=pair_arrays(FP32))
def test_fp32_binary(cmod, name, ab):
    fn = port(name)
    a, b = ab
    assert_same(name, getattr(cmod, name)(a, b), fn(a, b), a=a, b=b)


@pytest.mark.parametrize("name", ["fp17_add_rne_nvdla", "fp17_mul_rne_nvdla"])
@SETTINGS
@given(ab=pair_arrays(FP17))
def test_fp17_binary(cmod, name, ab):
    fn = port(name)
    a, b = ab
    assert_same(name, getattr(cmod, name)(a, b), fn(a, b), a=a, b=b)


@SETTINGS
@given(a=word_arrays(words(FP32)))
def test_fp32_relu(cmod, a):
    fn = port("fp32_relu_nvdla")
    assert_same("fp32_relu_nvdla", cmod.fp32_relu_nvdla(a), fn(a), a=a)


# --- conversions ---------------------------------------------------------------------------------


@SETTINGS
@given(f=word_arrays(words(FP32, tuple(FP16_EDGES)) | tie_words(FP32, FP16_EDGES)))
def test_fp32_to_fp16(cmod, f):
    fn = port("fp32_to_fp16_rne_sat_nvdla")
    assert_same("fp32_to_fp16_rne_sat_nvdla", cmod.fp32_to_fp16_rne_sat_nvdla(f), fn(f), f=f)


@SETTINGS
@given(f=word_arrays(words(FP32, tuple(FP17_EDGES)) | tie_words(FP32, FP17_EDGES)))
def test_fp32_to_fp17(cmod, f):
    fn = port("fp32_to_fp17_rne_sat_nvdla")
    assert_same("fp32_to_fp17_rne_sat_nvdla", cmod.fp32_to_fp17_rne_sat_nvdla(f), fn(f), f=f)


# --- the SDP LUT's index and interpolation weights ------------------------------------------------

RSHIFTS = np.arange(-128, 128, dtype=np.int64)  # yLutRegIdxType: every signed 8-bit value


@SETTINGS
@given(f=word_arrays(words(FP32, (100, 110, 120, 130, 140, 150, 160))))
def test_fp32_to_int_frac_every_rshift(cmod, f):
    fn = port("fp32_to_int_frac_nvdla")
    ff, rs = f[:, None], RSHIFTS[None, :]
    want_int, want_frac = cmod.fp32_to_int_frac_nvdla(ff, rs)
    got_int, got_frac = fn(ff, rs)
    assert_same("fp32_to_int_frac_nvdla (int)", want_int, got_int, f=ff, rshift=rs)
    assert_same("fp32_to_int_frac_nvdla (frac)", want_frac, got_frac, f=ff, rshift=rs)


@st.composite
def fractions(draw) -> int:
    """35-bit fractions: random, near a power of two, or the bits below the 11 kept ones a tie."""
    lead = draw(st.integers(0, 34))  # position of the leading 1
    kind = draw(st.sampled_from(["random", "power", "tie"]))
    if kind == "random":
        return draw(st.integers(0, (1 << 35) - 1))
    if kind == "power":
        return (1 << lead) + draw(st.sampled_from([0, 1, -1]))
    k = max(lead - 10, 1)  # dropped bits below the 11-bit significand
    half = 1 << (k - 1)
    body = (1 << lead) | (draw(st.integers(0, (1 << max(lead - k, 0)) - 1)) << k)
    return min(body | draw(st.sampled_from([half, half - 1, half + 1])), (1 << 35) - 1)


@SETTINGS
@given(frac=st.lists(fractions(), min_size=1, max_size=64))
def test_fraction_to_fp17(cmod, frac):
    fn = port("fraction_to_fp17_nvdla")
    x = np.array(frac, dtype=np.uint64)
    assert_same("fraction_to_fp17_nvdla", cmod.fraction_to_fp17_nvdla(x), fn(x), frac=x)


# --- the PDP's and CDP's extra primitives --------------------------------------------------------


def test_fp17_to_fp16_all_patterns(cmod):
    fn = port("fp17_to_fp16_rne_sat_nvdla")
    x = np.arange(1 << 17, dtype=np.uint32)
    assert_same("fp17_to_fp16_rne_sat_nvdla", cmod.fp17_to_fp16_rne_sat_nvdla(x), fn(x), x=x)


def test_fraction16_to_fp17_all_patterns(cmod):
    fn = port("fraction_to_fp17_nvdla")
    f = np.arange(1 << 16, dtype=np.uint64)
    assert_same("fraction_to_fp17_nvdla", cmod.fraction_to_fp17_nvdla(f, 16), fn(f, 16), f=f)


@pytest.mark.parametrize("name", ["fp16_max_nvdla", "fp16_min_nvdla"])
def test_fp16_max_min_against_every_pattern(cmod, name):
    """Every fp16 word against a fixed sample of words (±0, ±Inf, NaNs, near neighbours)."""
    fn = port(name)
    sample = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7BFF, 0x0001, 0x3C00,
                       0xBC00, 0x3C01], dtype=np.uint16)  # fmt: skip
    a = np.repeat(ALL_FP16, sample.size)
    b = np.tile(sample, ALL_FP16.size)
    for x, y in ((a, b), (b, a)):
        assert_same(name, getattr(cmod, name)(x, y), fn(x, y), a=x, b=y)
