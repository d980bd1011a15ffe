"""Real-peer tests: the emulation against PyTorch's bundled oneDNN, bit for bit.

Each ISA cap runs one subprocess (``peer_torch.py``) with ``ONEDNN_MAX_CPU_ISA`` set to ``AVX2``,
``AVX512_CORE`` or left unset, and ``ONEDNN_VERBOSE=1`` so that the implementation oneDNN picked
for each call is known (it fixes the pairing order and the f32 order, page §5.2/§6.2). The cases
are small and saturation-prone (u8 near 255 against weights near ±127 of one sign, odd reduction
tails, zero points, the ``N = 1`` gemm irregularity). Skipped, with the reason, where torch is
not installed, is not 2.13 (oneDNN 3.12), or the CPU lacks the ISA.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.onednn import (
    Conv2dParams,
    ConvGeometry,
    Isa,
    MatmulParams,
    QuantizedConv2dParams,
    QuantizedLinearParams,
    Requantization,
    conv2d,
    matmul,
    quantized_conv2d,
    quantized_linear,
)
from tests.backends.onednn.peer_runner import (
    AVX512_CORE_FLAGS,
    CAPS,
    conv_family,
    cpu_flags,
    host_isa,
    impl_name,
    linear_family,
    run_peer_script,
)

PEER = Path(__file__).with_name("peer_torch.py")


def F32(v: float) -> float:
    """The binary32 value nearest ``v``, as a Python float."""
    return float(np.float32(v))


def _rail(rng, shape, dtype, rail, frac=0.7):
    """Random values with ``frac`` of them in ``rail = (lo, hi)`` (the saturation-prone rail)."""
    lo, hi = rail
    info = np.iinfo(dtype)
    v = rng.integers(int(info.min), int(info.max) + 1, size=shape)
    return np.where(rng.random(shape) < frac, rng.integers(lo, hi + 1, size=shape), v).astype(dtype)


def make_cases() -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """The arrays (``name/array``) and attributes of every case; deterministic."""
    rng = np.random.default_rng(20250002)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}

    def add(name, attrs, **tensors):
        meta[name] = attrs
        for k, v in tensors.items():
            arrays[f"{name}/{k}"] = v

    for label, (m, k, n) in {"mv": (3, 7, 1), "mm": (4, 9, 3)}.items():
        add(
            f"int_mm:{label}",
            {},
            A=_rail(rng, (m, k), np.int8, (100, 127)),
            B=_rail(rng, (k, n), np.int8, (100, 127)),
        )
    add("int_mm:neg", {}, A=np.full((2, 4), -128, np.int8), B=np.full((4, 1), 127, np.int8))
    for zp in (0, 17):
        add(
            f"qlinear_acc:zp{zp}",
            {"x_zero_point": zp},
            x=_rail(rng, (3, 9), np.uint8, (230, 255)),
            w=_rail(rng, (4, 9), np.int8, (110, 127)),
        )
    geo = {"stride": [1, 2], "padding": [1, 1], "dilation": [1, 1], "groups": 1}
    add(
        "qconv_acc:c3",
        {"x_zero_point": 9, **geo},
        x=_rail(rng, (1, 3, 5, 6), np.uint8, (230, 255)),
        w=_rail(rng, (4, 3, 3, 3), np.int8, (110, 127)),
    )
    # binary32 scales; 0.03 and 0.0123 (as binary32) change under the round trip rr(rr(s))
    q = {"x_scale": F32(0.03), "x_zero_point": 3, "y_scale": F32(0.0123), "y_zero_point": 100}
    add(
        "qlinear:bias",
        {**q, "w_scales": [0.046875, F32(0.1), F32(0.0123)]},
        x=_rail(rng, (2, 6), np.uint8, (230, 255)),
        w=_rail(rng, (3, 6), np.int8, (110, 127)),
        bias=np.array([0.5, -7.25, 3.0], np.float32),
    )
    add(
        "qconv:bias",
        {**q, "w_scales": [F32(0.03), 0.03125], **geo},
        x=_rail(rng, (1, 2, 4, 5), np.uint8, (230, 255)),
        w=_rail(rng, (2, 2, 2, 3), np.int8, (110, 127)),
        bias=np.array([1.5, -2.0], np.float32),
    )
    return arrays, meta


def run_peer(cap: str | None, tmp: Path) -> tuple[dict[str, np.ndarray], dict[str, list[str]], str]:
    """Run the peer once; return its outputs, the exec lines per case, and the oneDNN version."""
    arrays, meta = make_cases()
    return run_peer_script(PEER, arrays, meta, cap, tmp)


@pytest.fixture(scope="module", params=list(CAPS))
def peer(request, tmp_path_factory):
    """One peer run per ISA cap, shared by the tests of this module."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: pip install torch==2.13.0 (CPU) to run the real peer")
    flags = cpu_flags()
    cap = request.param
    isa = CAPS[cap] or host_isa(flags)
    if cap == "AVX2" and "avx2" not in flags:
        pytest.skip("this CPU has no AVX2: ONEDNN_MAX_CPU_ISA=AVX2 would not select that path")
    if cap == "AVX512_CORE" and not flags >= AVX512_CORE_FLAGS:
        pytest.skip(f"this CPU lacks AVX-512 core ({sorted(AVX512_CORE_FLAGS - flags)} missing)")
    if isa is None:
        pytest.skip("this CPU has no AVX2: oneDNN's SSE4.1 int8 path is not emulated")
    outputs, lines, version = run_peer(
        None if cap == "unset" else cap, tmp_path_factory.mktemp(cap)
    )
    if not version.startswith("3.12"):
        pytest.skip(f"oneDNN {version or '?'} is bundled; the emulation pins 3.12 (torch 2.13.0)")
    return isa, outputs, lines


def _geometry(m: dict) -> ConvGeometry:
    ph, pw = m["padding"]
    return ConvGeometry(tuple(m["stride"]), (ph, pw, ph, pw), tuple(m["dilation"]), m["groups"])


def _quant(m: dict) -> Requantization:
    return Requantization(
        m["x_scale"], m["x_zero_point"], tuple(m["w_scales"]), m["y_scale"], m["y_zero_point"]
    )


def emulate(name: str, c: dict, m: dict, isa: Isa, lines: list[str]) -> np.ndarray:
    """The emulation's answer to case ``name``, in the peer's output layout and dtype."""
    kind = name.split(":", maxsplit=1)[0]
    if kind == "int_mm":
        return matmul(c["A"], c["B"], MatmulParams(isa, "s8", "gemm")).acc
    if kind == "qlinear_acc":
        acc = matmul(c["x"], c["w"].T, MatmulParams(isa, "u8", "matmul", m["x_zero_point"])).acc
        return acc.astype(np.float32)
    if kind == "qconv_acc":
        family, _ = conv_family(impl_name(lines, "convolution"))
        p = Conv2dParams(isa, "u8", family, _geometry(m), m["x_zero_point"])
        return conv2d(c["x"], c["w"], p).acc.astype(np.float32)
    if kind == "qlinear":
        p = QuantizedLinearParams(isa, linear_family(impl_name(lines, "matmul")), _quant(m))
        return quantized_linear(c["x"], c["w"], p, c.get("bias")).y
    _, family = conv_family(impl_name(lines, "convolution"))
    p = QuantizedConv2dParams(isa, family, _quant(m), _geometry(m))
    return quantized_conv2d(c["x"], c["w"], p, c.get("bias")).y


@pytest.mark.peer
@pytest.mark.parametrize("name", list(make_cases()[1]))
def test_emulation_matches_onednn(peer, name):
    isa, outputs, lines = peer
    arrays, meta = make_cases()
    c = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(name + "/")}
    got = emulate(name, c, meta[name], isa, lines[name])
    want = outputs[name]
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert np.array_equal(got, want), (
        f"{name} on {isa.value} ({lines[name]}): emulation {got.ravel().tolist()} != oneDNN "
        f"{want.ravel().tolist()}"
    )


def test_cases_saturate_on_non_vnni():
    """The peer cases are meant to catch pairing errors: they must saturate on avx2."""
    arrays, _ = make_cases()
    sat = matmul(arrays["int_mm:mm/A"], arrays["int_mm:mm/B"], MatmulParams("avx2", "s8", "gemm"))
    assert sat.saturated_pairs > 0


@pytest.mark.peer
@pytest.mark.filterwarnings("ignore:Please use quant_min and quant_max")
def test_qparams_match_pytorch_observers():
    """activation_qparams / weight_scales against torch 2.13's observers, bit for bit."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

    from quantemu.backends.onednn import activation_qparams, weight_scales

    rng = np.random.default_rng(7)
    for reduce_range in (False, True):
        for lo, hi in [(-1.0, 3.0), (0.0, 6.0), (-0.37, 0.0), (0.2, 0.9), (-5e-8, 1e-8)]:
            obs = MinMaxObserver(dtype=torch.quint8, reduce_range=reduce_range)
            obs(torch.tensor([lo, hi], dtype=torch.float32))
            scale, zp = obs.calculate_qparams()
            assert activation_qparams(lo, hi, reduce_range=reduce_range) == (
                float(scale[0]),
                int(zp[0]),
            )
        w = (rng.standard_normal((5, 3, 2, 2)) * rng.uniform(0.01, 2, (5, 1, 1, 1))).astype("f4")
        obs = PerChannelMinMaxObserver(
            ch_axis=0,
            dtype=torch.qint8,
            qscheme=torch.per_channel_symmetric,
            reduce_range=reduce_range,
        )
        obs(torch.from_numpy(w))
        want = obs.calculate_qparams()[0].numpy()
        assert np.array_equal(weight_scales(w, reduce_range=reduce_range), want)
