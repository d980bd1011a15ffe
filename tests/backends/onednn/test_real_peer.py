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
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.onednn import (
    Conv2dParams,
    ConvGeometry,
    ConvImpl,
    Isa,
    MatmulParams,
    QuantizedConv2dParams,
    QuantizedImpl,
    QuantizedLinearParams,
    Requantization,
    conv2d,
    matmul,
    quantized_conv2d,
    quantized_linear,
)

PEER = Path(__file__).with_name("peer_torch.py")


def F32(v: float) -> float:
    """The binary32 value nearest ``v``, as a Python float."""
    return float(np.float32(v))


AVX512_CORE_FLAGS = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def cpu_flags() -> set[str]:
    """The x86 feature flags of this CPU (empty where /proc/cpuinfo is unreadable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def host_isa(flags: set[str]) -> Isa | None:
    """The int8 code path oneDNN takes here when uncapped (None: none that is emulated)."""
    core = flags >= AVX512_CORE_FLAGS
    if core and "amx_int8" in flags:
        return Isa.AVX512_CORE_AMX
    if core and "avx512_vnni" in flags:
        return Isa.AVX512_CORE_VNNI
    if "avx2" in flags and "avx_vnni" in flags:
        return Isa.AVX2_VNNI
    if core:
        return Isa.AVX512_CORE
    return Isa.AVX2 if "avx2" in flags else None


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
    src, dst = tmp / "cases.npz", tmp / "out.npz"
    np.savez(src, __meta__=np.array(json.dumps(meta)), **arrays)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEDNN_", "DNNL_"))}
    env["ONEDNN_VERBOSE"] = "1"
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    proc = subprocess.run(
        [sys.executable, str(PEER), str(src), str(dst)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode:
        pytest.fail(f"peer_torch.py failed ({cap=}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    lines: dict[str, list[str]] = {}
    version, current = "", None
    for line in proc.stdout.splitlines():
        if "oneDNN v" in line and ",info," in line:
            version = line.split("oneDNN v", 1)[1].split()[0]
        elif line.startswith("CASE "):
            current = line[5:]
            lines[current] = []
        elif line == "END":
            current = None
        elif current and ",exec," in line:
            lines[current].append(line)
    with np.load(dst) as out:
        return {k: out[k] for k in out.files}, lines, version


CAPS = {"AVX2": Isa.AVX2, "AVX512_CORE": Isa.AVX512_CORE, "unset": None}


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


def _impl(lines: list[str], primitive: str) -> str:
    names = [ln.split(",")[6] for ln in lines if ln.split(",")[5] == primitive]
    assert names, f"no {primitive} exec line in {lines}"
    return names[-1]


def _conv_family(name: str) -> tuple[ConvImpl, QuantizedImpl]:
    if name.startswith("jit_uni_int8"):
        return ConvImpl.DIRECT, QuantizedImpl.JIT_UNI
    if name.startswith("jit_int8"):
        return ConvImpl.DIRECT, QuantizedImpl.JIT_AVX512
    if name.startswith(("brg_conv_fwd", "brgconv_1x1", "brdgmm_dw")):
        return ConvImpl.DIRECT, QuantizedImpl.BRGEMM  # no C/groups = 1 case: no relocation
    if name.startswith("ref"):
        return ConvImpl.REF, QuantizedImpl.REF
    pytest.fail(f"convolution implementation {name!r} is not mapped to a family")


def _linear_family(name: str) -> QuantizedImpl:
    if name == "gemm:jit":
        return QuantizedImpl.JIT_UNI
    if name.startswith("brg_matmul"):
        return QuantizedImpl.BRGEMM
    pytest.fail(f"matmul implementation {name!r} is not mapped to a family")


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
        family, _ = _conv_family(_impl(lines, "convolution"))
        p = Conv2dParams(isa, "u8", family, _geometry(m), m["x_zero_point"])
        return conv2d(c["x"], c["w"], p).acc.astype(np.float32)
    if kind == "qlinear":
        p = QuantizedLinearParams(isa, _linear_family(_impl(lines, "matmul")), _quant(m))
        return quantized_linear(c["x"], c["w"], p, c.get("bias")).y
    _, family = _conv_family(_impl(lines, "convolution"))
    p = QuantizedConv2dParams(isa, family, _quant(m), _geometry(m))
    return quantized_conv2d(c["x"], c["w"], p, c.get("bias")).y


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
