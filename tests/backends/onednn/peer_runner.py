"""Shared machinery of the real-peer tests: this CPU's ISA, and running a PyTorch peer script.

A peer script (``peer_torch.py``, ``peer_model.py``) reads an ``.npz`` of inputs with a JSON
``__meta__`` entry, runs PyTorch's bundled oneDNN, prints ``CASE <name>`` / ``END`` around each
case (with ``ONEDNN_VERBOSE`` exec lines in between) and writes its outputs to another ``.npz``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.onednn import ConvImpl, Isa, QuantizedImpl

AVX512_CORE_FLAGS = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}

# ONEDNN_MAX_CPU_ISA values the peers run under -> the ISA they select (None: the host's).
CAPS = {"AVX2": Isa.AVX2, "AVX512_CORE": Isa.AVX512_CORE, "unset": None}


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


def run_peer_script(
    script: Path, arrays: dict[str, np.ndarray], meta: dict, cap: str | None, tmp: Path
) -> tuple[dict[str, np.ndarray], dict[str, list[str]], str]:
    """Run ``script`` once under ``ONEDNN_MAX_CPU_ISA=cap`` (None: unset).

    Returns its outputs, the oneDNN exec lines per case, and the oneDNN version it reported.
    """
    src, dst = tmp / "in.npz", tmp / "out.npz"
    np.savez(src, __meta__=np.array(json.dumps(meta)), **arrays)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEDNN_", "DNNL_"))}
    env["ONEDNN_VERBOSE"] = "1"
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    proc = subprocess.run(
        [sys.executable, str(script), str(src), str(dst)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode:
        pytest.fail(f"{script.name} failed ({cap=}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
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


def impl_name(lines: list[str], primitive: str) -> str:
    """The implementation name of the last ``primitive`` exec line."""
    names = [ln.split(",")[6] for ln in lines if ln.split(",")[5] == primitive]
    assert names, f"no {primitive} exec line in {lines}"
    return names[-1]


def conv_family(name: str) -> tuple[ConvImpl, QuantizedImpl]:
    """The emulated kernel families of a oneDNN convolution implementation name."""
    if name.startswith("jit_uni_int8"):
        return ConvImpl.DIRECT, QuantizedImpl.JIT_UNI
    if name.startswith("jit_int8"):
        return ConvImpl.DIRECT, QuantizedImpl.JIT_AVX512
    if name.startswith(("brg_conv_fwd", "brgconv_1x1", "brdgmm_dw")):
        return ConvImpl.DIRECT, QuantizedImpl.BRGEMM  # no C/groups = 1 case: no relocation
    if name.startswith("ref"):
        return ConvImpl.REF, QuantizedImpl.REF
    pytest.fail(f"convolution implementation {name!r} is not mapped to a family")


def linear_family(name: str) -> QuantizedImpl:
    """The emulated kernel family of a oneDNN matmul implementation name."""
    if name == "gemm:jit":
        return QuantizedImpl.JIT_UNI
    if name.startswith("brg_matmul"):
        return QuantizedImpl.BRGEMM
    pytest.fail(f"matmul implementation {name!r} is not mapped to a family")
