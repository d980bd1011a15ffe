"""XC_softmax / XC_batched_softmax: glibc's expf, xcore-opt's table, lib_nn's float kernel.

The kernel is checked against its scalar twin, the table and ``expf`` against values taken from
glibc 2.36 (x86-64 with FMA) and the tables xcore-opt 1.4.2 wrote, and whole models against
y_xcore and the XC_softmax dumps of XMOS's host interpreter (tests/data/tflite_refs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import platform
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import signed_ints

import quantemu
from quantemu.backends.xs3.xformer import reference as ref
from quantemu.backends.xs3.xformer.lower.softmax import XcSoftmaxLayer, _kept_because
from quantemu.backends.xs3.xformer.softmax import expf_glibc, softmax_exp_table, xc_softmax
from quantemu.errors import InvalidInputError
from quantemu.graph.tflite_import import NCHW_KEY
from quantemu.graph.tflite_reader import read_tflite
from quantemu.program import LinearEncoding, QTensor

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
MODELS = ("softmax", "mixed_mobilenet")
I8 = signed_ints(8)
ZP = st.integers(-128, 127)
# input scales as TFLite stores them, from tiny to large enough that exp overflows
SCALE = st.floats(-14, 0).map(lambda e: float(np.float32(2.0**e))) | st.floats(1e-6, 0.7).map(
    lambda v: float(np.float32(v))
)
F32_BITS = st.integers(0, 0x7F800000)  # +0 .. +inf, subnormals included: any table entry


def _f32(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


def _rows_equal_twin(codes: np.ndarray, table: np.ndarray) -> None:
    got, counters = xc_softmax(codes, table)
    want = [ref.xc_softmax_row(row.tolist(), table) for row in codes]
    assert got.tolist() == want
    assert counters["nan_to_zero"] <= got.size


@given(SCALE, ZP, st.lists(st.lists(I8, min_size=1, max_size=40), min_size=1, max_size=4))
def test_kernel_matches_twin_on_xcore_opt_tables(scale, zp, rows):
    width = min(len(r) for r in rows)
    codes = np.array([r[:width] for r in rows], np.int8)
    _rows_equal_twin(codes, softmax_exp_table(scale, zp))


@given(st.lists(F32_BITS, min_size=256, max_size=256), st.lists(I8, min_size=1, max_size=30))
def test_kernel_matches_twin_on_any_table(bits, row):
    """Zeros, subnormals and inf entries: S = 0, S tiny (inv = inf), S = inf (NaN -> 0)."""
    table = np.array([_f32(b) for b in bits], np.float32)
    _rows_equal_twin(np.array([row], np.int8), table)


def test_dominant_code_saturates_and_overflow_gives_zero():
    # one entry: v * ((1/v) * 256) rounds to 256, the kernel's 128 saturates to 127
    t = softmax_exp_table(0.0078125, -128)
    assert xc_softmax(np.array([[5]], np.int8), t)[0].tolist() == [[127]]
    # scale 0.5, zp -128: exp(127.5) = inf -> S = inf, inv = 0: inf * 0 = NaN -> 0, 1 * 0 -> -128
    y, counters = xc_softmax(np.array([[127, 0, -128]], np.int8), softmax_exp_table(0.5, -128))
    assert y.tolist() == [[0, -128, -128]] and counters["nan_to_zero"] == 1
    # scale 0.5, zp 127: every entry exp(<= -127.5) = 0 -> S = 0, inv = inf, 0 * inf = NaN -> 0
    assert xc_softmax(np.full((1, 6), -128, np.int8), softmax_exp_table(0.5, 127))[0].max() == 0


# glibc 2.36 expf (FMA build) where a correctly rounded exp differs by one ULP
GLIBC_EXPF = {
    0.8583747744560242: 0x4016FF27,
    4.0612382888793945: 0x42682F40,
    -6.729869365692139: 0x3A9C971D,
    1.0976561307907104: 0x403FD107,
    -63.09946060180664: 0x11FA2993,  # this one only with fused multiply-adds
    88.0: 0x7EF882B7,
    -100.0: 0x0000001B,  # subnormal
    89.0: 0x7F800000,
    -104.0: 0,
}


@pytest.mark.parametrize(("x", "bits"), GLIBC_EXPF.items())
def test_expf_equals_glibc(x, bits):
    assert np.float32(expf_glibc(x)).view(np.uint32) == bits


def _libm_expf():
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return None
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if platform.machine() == "x86_64" and " fma" not in flags:
        return None  # glibc's non-FMA build: a few results differ by one ULP
    path = ctypes.util.find_library("m")
    if path is None or "musl" in path:
        return None
    fn = ctypes.CDLL(path).expf
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


@given(st.floats(-110, 95, width=32))
def test_expf_equals_the_live_libm(x):
    fn = _libm_expf()
    if fn is None:
        pytest.skip("needs glibc's FMA expf (Linux x86-64 with FMA, or aarch64)")
    assert np.float32(expf_glibc(x)) == np.float32(fn(x))


def test_table_by_hand_and_refusals():
    t = softmax_exp_table(1.0, 3)
    # entry i is the code i - 128: exp((i - 128 - zp) * scale)
    assert t[131] == np.float32(1.0) and t[132] == np.float32(expf_glibc(1.0))
    with pytest.raises(InvalidInputError, match="scale"):
        softmax_exp_table(0.0, 0)
    with pytest.raises(InvalidInputError, match="256"):
        xc_softmax(np.zeros((1, 3), np.int8), np.ones(10, np.float32))


def _stored_tables(path: Path) -> list[np.ndarray]:
    model = read_tflite(path)
    return [
        model.tensors[op.inputs[1]].data
        for op in model.operators
        if op.custom_code in ("XC_softmax", "XC_batched_softmax")
    ]


@pytest.mark.parametrize("name", MODELS)
def test_paths_equal_the_host_interpreter(name):
    """int8 path (table derived) and compiled path (table read): y_xcore, same table bits."""
    data = np.load(DATA / f"{name}.npz")
    tables = []
    for suffix in (".int8.tflite", ".xcore.tflite"):
        program = quantemu.compile(DATA / f"{name}{suffix}", "xs3")
        out = program.run(data["x_int8"]).tensors[program.graph.outputs[0]].codes
        assert np.array_equal(out.reshape(data["y_xcore"].shape), data["y_xcore"]), suffix
        layers = [la for la in program.lowered.layers if isinstance(la, XcSoftmaxLayer)]
        assert [la.op for la in layers] == ["XC_softmax"]
        tables.append(layers[0].table)
    stored = _stored_tables(DATA / f"{name}.xcore.tflite")
    for table in (*tables, *stored):
        assert np.array_equal(table.view(np.uint32), tables[0].view(np.uint32))


@pytest.mark.parametrize("name", MODELS)
def test_xc_softmax_on_its_dumped_input(name):
    """The XC_softmax layer on the host's dump of its input gives the host's dump of its
    output (the interpreter's own intermediates, first inputs of the npz)."""
    info = json.loads((DATA / "MANIFEST.json").read_text())["models"][name]["layers"]
    dumps = np.load(DATA / f"{name}.layers.npz")
    keys = [t["key"] for t in info["xcore_tensors"]]
    ops = [t["op"] for t in info["xcore_tensors"]]
    at = ops.index("XC_softmax")
    before = next(k for k in reversed(keys[:at]) if k is not None)  # XC_no_op aliases its input
    x, want = dumps[before], dumps[keys[at]]
    layer = next(
        la
        for la in quantemu.compile(DATA / f"{name}.xcore.tflite", "xs3").lowered.layers
        if isinstance(la, XcSoftmaxLayer)
    )
    codes = x.reshape(want.shape)
    got = layer.run([QTensor(codes, LinearEncoding(np.float32(1.0), np.int8(0), "int8"))])
    assert np.array_equal(got.tensor.codes, want)


def _ctx(shape, *, dtype="int8", nchw=False):
    enc = LinearEncoding(np.float32(0.05), np.int8(-3), dtype)
    graph = SimpleNamespace(metadata={NCHW_KEY: "x" if nchw else ""})
    return SimpleNamespace(
        shape=lambda _name: shape,
        encoding=lambda _name: enc,
        output_encoding=lambda _node: LinearEncoding(np.float32(1 / 256), np.int8(-128), "int8"),
        graph=graph,
    )


@pytest.mark.parametrize(
    ("shape", "axis", "nchw", "becomes_xc"),
    [
        (("batch", 10), 1, False, True),  # (1, C): XC_softmax
        (("batch", 1), 1, False, True),  # even one class
        (("batch", 5, 12), 2, False, True),  # (1, T, C): XC_batched_softmax
        (("batch", 1, 12), 2, False, False),  # (1, 1, C): SOFTMAX kept (checked on 1.4.2)
        (("batch", 10, 3, 4), 1, True, True),  # NHWC (1, 3, 4, 10) held NCHW: reshaped, batched
        (("batch", 12, 1, 1), 1, True, False),  # (1, 1, 1, C): kept
        (("batch", 3, 1, 7), 3, False, True),  # held NHWC: (1, 3, 7)
        (("batch", 2, 3, 1, 4), 4, False, False),  # rank 5: kept
        (("batch", 10, 3, 4), 2, True, False),  # not the file's last axis
    ],
)
def test_when_xcore_opt_uses_xc_softmax(shape, axis, nchw, becomes_xc):
    node = SimpleNamespace(inputs=("x",), attrs={"axis": axis, "beta": 1.0})
    assert (_kept_because(_ctx(shape, nchw=nchw), node) == "") is becomes_xc


def test_beta_and_type_keep_tflite_softmax():
    node = SimpleNamespace(inputs=("x",), attrs={"axis": 1, "beta": 2.0})
    assert "beta" in _kept_because(_ctx(("batch", 10)), node)
    node.attrs["beta"] = 1.0
    assert "int8" in _kept_because(_ctx(("batch", 10), dtype="int16"), node)
