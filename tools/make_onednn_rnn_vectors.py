"""Record int8 LSTM and GRU conformance vectors from the oneDNN library itself (issue 20).

    python tools/make_onednn_rnn_vectors.py --seed 0 --out tests/data/onednn_rnn

The oracle is oneDNN 3.2.0 (``onednn-cpu-gomp==2023.2.0``, which needs only libgomp; its headers
come from ``onednn-devel-cpu-gomp==2023.2.0``). The script finds both in this Python environment
and installs them with pip when they are missing, compiles ``tools/onednn_rnn_oracle.c`` against
them with the system C compiler (``cc``), and runs it once per case and ISA cap.

The oracle (C API): u8 ``src_layer``/``src_iter`` and f32 ``src_iter_c`` with
``dnnl_primitive_attr_set_rnn_data_qparams(scale, shift)``; f32 weights in ``ldigo`` reordered
into the primitive's s8 layout by a reorder carrying
``dnnl_primitive_attr_set_rnn_weights_qparams`` (per gate and output channel, mask 24, the
reorder also computing the zero-point compensation); f32 ``ldgo`` bias; forward inference.
Every weight is ``code / 2^k`` with a power-of-two scale ``2^k``, so the reorder's quantization
gives back exactly ``code``: a vector records the s8 codes the primitive multiplied.

Each case runs with ``ONEDNN_MAX_CPU_ISA`` = AVX2, AVX512_CORE and unset, with
``ONEDNN_VERBOSE=1``: the vector's ``isa`` attribute is the ISA oneDNN reports using (its
``info,cpu,isa:`` line, so the unset run names the machine's own code path, e.g.
``avx512_core_vnni``), and its ``source`` holds the cap and the implementation oneDNN chose (its
``impl_info_str``, e.g. ``brgemm:avx512_core_vnni`` or ``ref``). Observed on the
development machine (AVX-512 VNNI): unset -> ``brgemm:avx512_core_vnni``; AVX512_CORE and AVX2 ->
``ref`` (the reference RNN driver over oneDNN's s8u8s32 GEMM). Int8 LBR-GRU is unimplemented in
3.2.0 (``dnnl_lbr_gru_forward_primitive_desc_create`` returns ``dnnl_unimplemented`` at every
ISA), so there are no LBR-GRU vectors.

``--prefix PREFIX`` runs another oneDNN build instead (nothing is installed): the ``onednn``
2026.1.0 wheel is oneDNN 3.13's SYCL build, which loads on a CPU-only machine with its Intel
runtimes (``pip install onednn==2026.1.0 onednn-devel==2026.1.0`` into a venv, 2 GB) once
``LD_LIBRARY_PATH`` holds ``PREFIX/lib`` and ``OCL_ICD_FILENAMES`` names its
``libintelocl.so`` (the shipped ICD file points to a placeholder path); the script sets both.
oneDNN 3.13.2 gives exactly the 3.2.0 vectors (seed 0, all 96) and passes seeds 1-9; it runs
``brgemm:avx2``/``brgemm:avx512_core`` where 3.2.0 ran ``ref``.

Output: ``lstm.jsonl.gz`` and ``gru.jsonl.gz`` in ``--out`` (conformance/FORMAT.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ORACLE_C = ROOT / "tools" / "onednn_rnn_oracle.c"
WHEELS = ("onednn-cpu-gomp==2023.2.0", "onednn-devel-cpu-gomp==2023.2.0")
ISAS = ("AVX2", "AVX512_CORE", None)  # ONEDNN_MAX_CPU_ISA values; None: unset
GATES = {"lstm": 4, "gru": 3}
MASK = 24  # scales per gate (dim 3) and output channel (dim 4) of ldigo


def _library(prefix: Path | None) -> tuple[Path, Path]:
    """The library folder and include folder of the oneDNN under ``prefix``; by default this
    environment's oneDNN 3.2.0 (installed by pip with the two wheels when missing)."""
    given = prefix is not None
    prefix = prefix or Path(sysconfig.get_paths()["data"])
    lib, include = prefix / "lib", prefix / "include"
    found = (lib / "libdnnl.so.3").exists() and (include / "oneapi" / "dnnl" / "dnnl.h").exists()
    if not found and not given:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *WHEELS], check=True)
    if not (lib / "libdnnl.so.3").exists() or not (include / "oneapi" / "dnnl" / "dnnl.h").exists():
        raise SystemExit(f"no oneDNN under {prefix} (lib/libdnnl.so.3, include/oneapi/dnnl)")
    return lib, include


def _runtime_env(prefix: Path | None) -> dict[str, str]:
    """What another oneDNN build needs at run time: its runtimes beside it on the loader's path,
    and (SYCL builds) the OpenCL CPU driver, whose shipped ICD file names a placeholder path."""
    if prefix is None:
        return {}
    lib = prefix / "lib"
    env = {
        "LD_LIBRARY_PATH": os.pathsep.join(
            filter(None, [str(lib), os.environ.get("LD_LIBRARY_PATH")])
        )
    }
    if (lib / "libintelocl.so").exists() and "OCL_ICD_FILENAMES" not in os.environ:
        env["OCL_ICD_FILENAMES"] = str(lib / "libintelocl.so")
    return env


def _version(verbose: str) -> str:
    """``vX.Y.Z`` from ONEDNN_VERBOSE's ``info,oneDNN vX.Y.Z (commit ...)`` line."""
    for line in verbose.splitlines():
        if ",info,oneDNN " in line:
            return line.split(",info,oneDNN ", 1)[1].split(" ", 1)[0]
    raise SystemExit("ONEDNN_VERBOSE printed no 'info,oneDNN' version line")


def _oracle(folder: Path, prefix: Path | None) -> Path:
    lib, include = _library(prefix)
    binary = folder / "onednn_rnn_oracle"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("a C compiler (cc) is needed to build the oneDNN oracle")
    subprocess.run(
        [compiler, "-O1", f"-I{include}", str(ORACLE_C), f"-L{lib}", "-ldnnl",
         f"-Wl,-rpath,{lib}", "-o", str(binary)],
        check=True,
    )  # fmt: skip
    return binary


def _case(rng: np.random.Generator, cell: str, direction: str, layers: int, qparams) -> dict:
    g = GATES[cell]
    t, n, c = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.choice([8, 16, 24]))
    d = 2 if direction in ("concat", "sum") else 1
    scale, shift = qparams
    exponents = rng.integers(4, 9, size=g * c)
    return {
        "t": t, "n": n, "c": c, "layers": layers, "d": d, "direction": direction,
        "scale": scale, "shift": shift,
        "src_layer": rng.integers(0, 256, (t, n, c), dtype=np.uint8),
        "src_iter": rng.integers(0, 256, (layers, d, n, c), dtype=np.uint8),
        "src_iter_c": rng.standard_normal((layers, d, n, c)).astype(np.float32),
        "weights_layer": rng.integers(-127, 128, (layers, d, c, g, c)).astype(np.int8),
        "weights_iter": rng.integers(-127, 128, (layers, d, c, g, c)).astype(np.int8),
        "weights_scales": (2.0 ** exponents).astype(np.float32),
        "bias": rng.standard_normal((layers, d, g, c)).astype(np.float32),
    }  # fmt: skip


def resolved_isa(verbose: str) -> str:
    """quantemu's ``Isa`` value for the ISA oneDNN reports using (its ``info,cpu,isa:`` line):
    what the vector's ``isa`` attribute records, so that a run with no cap names its code path."""
    line = next((x for x in verbose.splitlines() if ",cpu,isa:" in x), None)
    if line is None:
        raise SystemExit("ONEDNN_VERBOSE printed no 'info,cpu,isa:' line")
    name = line.split(",cpu,isa:", 1)[1]
    vnni = "DL Boost" in name
    if "AMX" in name:
        return "avx512_core_amx"
    if "AVX-512" in name:
        return "avx512_core_vnni" if vnni else "avx512_core"
    if "AVX2" in name:
        return "avx2_vnni" if vnni else "avx2"
    raise SystemExit(f"oneDNN runs an ISA the emulation does not name: {name!r}")


def _run(
    binary: Path, cell: str, case: dict, isa: str | None, folder: Path, *, extra_env: dict
) -> tuple[tuple, dict]:
    """The oracle on ``case`` under ``ONEDNN_MAX_CPU_ISA=isa``: (resolved ISA, implementation)
    and the outputs."""
    g, scales = GATES[cell], case["weights_scales"]
    for name in ("src_layer", "src_iter", "src_iter_c", "bias"):
        case[name].tofile(folder / f"{name}.bin")
    for name in ("weights_layer", "weights_iter"):  # code / 2^k: the reorder gives back the code
        (case[name].astype(np.float32) / scales.reshape(g, case["c"])).tofile(
            folder / f"{name}.bin"
        )
    scales.tofile(folder / "wscales.bin")
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    env["ONEDNN_VERBOSE"] = "1"
    env.update(extra_env)
    if isa is not None:
        env["ONEDNN_MAX_CPU_ISA"] = isa
    argv = [str(binary), cell, str(folder), *(str(case[k]) for k in ("t", "n", "c", "layers")),
            case["direction"], "-", repr(case["scale"]), repr(case["shift"]), str(scales.size),
            str(MASK)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    impl = next(
        line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("impl")
    )
    run = (resolved_isa(done.stdout), impl, _version(done.stdout))
    t, n, c, layers, d = (case[k] for k in ("t", "n", "c", "layers", "d"))
    dlc = 2 * c if case["direction"] == "concat" else c
    out = {
        "dst_layer": np.fromfile(folder / "dst_layer.bin", np.uint8).reshape(t, n, dlc),
        "dst_iter": np.fromfile(folder / "dst_iter.bin", np.uint8).reshape(layers, d, n, c),
    }
    if cell == "lstm":
        out["dst_iter_c"] = np.fromfile(folder / "dst_iter_c.bin", np.float32).reshape(
            layers, d, n, c
        )
    return run, out


def _tensor(array: np.ndarray) -> dict:
    data = array.reshape(-1).tolist()
    if array.dtype.kind == "f":
        data = [float(np.float64(v)) for v in data]  # the float64 widening's shortest decimal
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": data}


def _vector(cell: str, label: str, run: tuple, case: dict, out: dict) -> dict:
    (isa, impl, version), cap, package = run
    names = ["src_layer", "src_iter", "weights_layer", "weights_iter", "weights_scales", "bias"]
    if cell == "lstm":
        names.insert(2, "src_iter_c")
    return {
        "id": f"onednn/{cell}/{isa}/{label}",
        "backend": "onednn",
        "op": cell,
        "attrs": {
            "direction": case["direction"],
            "layers": case["layers"],
            "data_scale": case["scale"],
            "data_shift": case["shift"],
            "weights_scales_mask": MASK,
            "isa": isa,
        },
        "inputs": {name: _tensor(case[name]) for name in names},
        "expected": {name: _tensor(value) for name, value in out.items()},
        "source": f"oneDNN {version} ({package}), implementation {impl}, "
        f"ONEDNN_MAX_CPU_ISA={cap or 'unset'}; "
        "tools/make_onednn_rnn_vectors.py",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--prefix",
        type=Path,
        help="another oneDNN build: PREFIX/lib/libdnnl.so.3 and PREFIX/include (e.g. a venv with "
        "onednn==2026.1.0 and onednn-devel, oneDNN 3.13's SYCL build); nothing is installed",
    )
    args = parser.parse_args(argv)
    package = "onednn-cpu-gomp 2023.2.0" if args.prefix is None else "library from --prefix"
    extra_env = _runtime_env(args.prefix)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        binary = _oracle(folder, args.prefix)
        for cell in GATES:
            vectors, index = [], 0
            for direction in ("l2r", "r2l", "concat", "sum"):
                for layers in (1, 2):
                    for qparams in ((127.0, 128.0), (63.5, 64.0)):
                        case = _case(rng, cell, direction, layers, qparams)
                        for cap in ISAS:
                            run, out = _run(binary, cell, case, cap, folder, extra_env=extra_env)
                            label = (
                                f"{index:04d}" if args.seed == 0 else f"seed{args.seed}/{index:04d}"
                            )
                            vectors.append(_vector(cell, label, (run, cap, package), case, out))
                        index += 1
            path = args.out / f"{cell}.jsonl.gz"
            text = "".join(json.dumps(v, allow_nan=False) + "\n" for v in vectors)
            # mtime 0: the same vectors give the same bytes
            path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
            impls = sorted({v["source"].split("implementation ")[1].split(",")[0] for v in vectors})
            print(f"{path}: {len(vectors)} vectors; implementations {impls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
