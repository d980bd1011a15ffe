"""Generate NVDLA FP16 direct-convolution (CMAC + CACC) vectors from NVIDIA's own C model.

    python tools/make_nvdla_conv_fp16_vectors.py --seed 0 --out tests/data/nvdla_conv_fp16
    python tools/make_nvdla_conv_fp16_vectors.py --seed 5 --out /tmp/s5 [--cases 40] [--hw PATH]

What it writes: ``conv_fp16.jsonl.gz`` (``--cases`` cases, default 40), op ``conv_fp16`` of
backend ``nvdla``: attrs ``STRIDE_X``, ``STRIDE_Y``, ``DILATION_X``, ``DILATION_Y``,
``PAD_LEFT``, ``PAD_TOP``, ``PAD_RIGHT``, ``PAD_BOTTOM`` (plain values, not "minus one") and
``PAD_VALUE`` (the raw fp16 word of padded positions, CSC's D_ZERO_PADDING_VALUE); inputs ``X``
``[C, H, W]`` and ``W`` ``[K, C, R, S]`` as float16 bits; expected ``Y`` ``[K, OH, OW]`` as
uint32: the fp32 words CACC sends to the SDP. Case ids ``nvdla/conv_fp16/s{seed}-{index:05d}``;
each ``note`` names the kind. Deterministic for a seed (NumPy ``default_rng``, gzip mtime 0).

Cases: C up to 200 (several 64-channel groups), K 1-20 (not multiples of 16 too), kernels 1-3
by 1-3, strides and dilations 1-2, pads 0-2 with random pad words; data and weights normal,
wide-exponent (forcing block-exponent shifts of 32 or more), cancelling (sums near 0), all-random
words, specials (+-0, subnormals, +-65504, +-Inf) and NaNs with payloads.

How the expected values are computed: :func:`build` extracts, with ``git show COMMIT:path``, from
nvdla/hw ``nvdlav1`` at :data:`COMMIT` (``--hw``, else ``$QUANTEMU_NVDLA_HW``, else
``/work/.mirror/nvdla+hw/repo``) four include files cut verbatim from the cmod
(:data:`LINE_RANGES`: class ``NvdlaMacCell`` of ``cmac/NV_NVDLA_cmac.h``, ``cacc_fp16_add`` and
``cacc_fp48_to_fp32`` of ``cacc/NV_NVDLA_cacc.cpp`` and their defines) and ``arnvdla.h``, then
compiles ``tools/nvdla_cc_fp16_harness.cpp`` (no arithmetic of its own, see its header) against
SystemC: ``--systemc PREFIX``, else ``$QUANTEMU_SYSTEMC``, else ``/usr`` when it has
``include/systemc.h``, else Debian's ``libsystemc-dev`` and ``libsystemc`` fetched with
``apt-get download`` and unpacked with ``dpkg -x`` into the build folder. This tool gathers, per
output element, the atomic ops in CSC's direct-convolution order (channel group outer, kernel
taps inner, row-major; padded positions carry PAD_VALUE, channels past C are 0; ``csc/
NV_NVDLA_csc.cpp`` 672-685 and 745-758): data movement only. The harness runs the MAC cell and
CACC on them. Each case runs in one process.

Needs: g++, git, the nvdla/hw sources at :data:`COMMIT`, SystemC (or apt-get + dpkg), NumPy.
Nothing of quantemu.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/ is not a package
from nvdla_cmod_fp import COMMIT, CmodUnavailable
from nvdla_cmod_src import (
    compile_harness,
    cut_lines,
    require_cxx,
    show_text,
    sources,
    write_jsonl_gz,
    write_stubs,
)

HARNESS_CPP = Path(__file__).resolve().with_name("nvdla_cc_fp16_harness.cpp")
TOOL = "tools/make_nvdla_conv_fp16_vectors.py"
HARNESS_NAME = "nvdla_cc_fp16_harness"
ENV_SYSTEMC = "QUANTEMU_SYSTEMC"
SYSTEMC_DEBS = ("libsystemc-dev", "libsystemc")
#: generated include file -> (source, (first line, last line), text expected at the first line)
LINE_RANGES = {
    "cmac_defs.inc": ("cmod/cmac/NV_NVDLA_cmac.h", (30, 51), "#define DATA_OPERAND_BIT_WIDTH"),
    "cmac_cell.inc": ("cmod/cmac/NV_NVDLA_cmac.h", (66, 854), "class NvdlaMacCell {"),
    "cacc_defs.inc": ("cmod/cacc/NV_NVDLA_cacc.h", (29, 42), "//stepheng add cacc FP39"),
    "cacc_fp.inc": ("cmod/cacc/NV_NVDLA_cacc.cpp", (1242, 1627), "// Input from cmac is FP44"),
}
SOURCE = (
    f"NVDLA cmod (nvdla/hw nvdlav1 {COMMIT}), x86 build with SystemC 2.3: NvdlaMacCell of "
    "cmod/cmac/NV_NVDLA_cmac.h and cacc_fp16_add/cacc_fp48_to_fp32 of cmod/cacc/NV_NVDLA_cacc.cpp "
    f"verbatim; driven by {TOOL} + tools/nvdla_cc_fp16_harness.cpp"
)
CHANNELS = 64
GEOMETRY = ("STRIDE_X", "STRIDE_Y", "DILATION_X", "DILATION_Y")
PADS = ("PAD_LEFT", "PAD_TOP", "PAD_RIGHT", "PAD_BOTTOM")


# --- extracting and building the harness ---------------------------------------------------------


def extract(hw: Path | None, dest: Path) -> Path:
    """Write the cut cmod include files, ``arnvdla.h`` and the stub ``log.h`` into ``dest``."""
    git = sources(hw)
    dest.mkdir(parents=True, exist_ok=True)
    for name, (path, (first, last), expected) in LINE_RANGES.items():
        text = cut_lines(show_text(git, path), path, first, last, expected)
        (dest / name).write_text(text, encoding="latin-1")
    (dest / "arnvdla.h").write_text(show_text(git, "cmod/include/arnvdla.h"), encoding="latin-1")
    write_stubs(dest, systemc=False)
    return dest


def _lib_dir(prefix: Path) -> Path | None:
    for sub in ("lib/x86_64-linux-gnu", "lib", "lib64", "lib-linux64"):
        d = prefix / sub
        if any(d.glob("libsystemc.so*")):
            return d
    return None


def find_systemc(explicit: Path | None, build_dir: Path) -> tuple[Path, Path]:
    """(include folder, library folder) of SystemC; fetches Debian's packages as a last resort."""
    env = os.environ.get(ENV_SYSTEMC)
    for prefix in [p for p in (explicit, Path(env) if env else None, Path("/usr")) if p]:
        lib = _lib_dir(prefix)
        if (prefix / "include" / "systemc.h").is_file() and lib is not None:
            return prefix / "include", lib
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise CmodUnavailable(f"SystemC not found; pass --systemc PREFIX or set {ENV_SYSTEMC}")
    debs, root = build_dir / "debs", build_dir / "systemc"
    debs.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        ["apt-get", "download", *SYSTEMC_DEBS], cwd=debs, capture_output=True, text=True,
        check=False, timeout=600,
    )  # fmt: skip
    if run.returncode != 0 or not list(debs.glob("*.deb")):
        raise CmodUnavailable(f"apt-get download {' '.join(SYSTEMC_DEBS)} failed: {run.stderr}")
    for deb in debs.glob("*.deb"):
        subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True, timeout=300)
    lib = _lib_dir(root / "usr")
    if lib is None or not (root / "usr" / "include" / "systemc.h").is_file():
        raise CmodUnavailable(f"the unpacked {' '.join(SYSTEMC_DEBS)} hold no SystemC")
    return root / "usr" / "include", lib


def build(hw: Path | None = None, out_dir: Path | None = None, systemc: Path | None = None):
    """Extract the cmod at :data:`COMMIT` and compile the harness; return the executable's path."""
    require_cxx()
    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="nvdla_cc_fp16_"))
    src = extract(hw, out_dir / "src")
    inc, lib = find_systemc(systemc, out_dir)
    # SystemC 2.3 is C++11 (no -std=c++98 here); the harness is one translation unit
    return compile_harness(HARNESS_CPP, src, (), out_dir / HARNESS_NAME,
                           flags=("-O1", "-w"), include=(inc,),
                           link=(f"-L{lib}", "-lsystemc", f"-Wl,-rpath,{lib}"))  # fmt: skip


# --- CSC's order of atomic ops (data movement only) ----------------------------------------------


def atomic_ops(x: np.ndarray, w: np.ndarray, attrs: dict) -> tuple[np.ndarray, tuple[int, int]]:
    """``[K, OH, OW, T, 128]`` words: per output its T atomic ops (64 data then 64 weights),
    channel group outer, kernel taps inner (row-major); and ``(OH, OW)``."""
    (c, h, wd), (k, _, r, s) = x.shape, w.shape
    sy, sx, dy, dx = (attrs[n] for n in ("STRIDE_Y", "STRIDE_X", "DILATION_Y", "DILATION_X"))
    pl, pt, pr, pb = (attrs[n] for n in PADS)
    oh = (h + pt + pb - (r - 1) * dy - 1) // sy + 1
    ow = (wd + pl + pr - (s - 1) * dx - 1) // sx + 1
    groups = -(-c // CHANNELS)
    xp = np.zeros((groups * CHANNELS, h + pt + pb, wd + pl + pr), np.int64)
    xp[:c] = attrs["PAD_VALUE"]
    xp[:c, pt : pt + h, pl : pl + wd] = x
    wp = np.zeros((k, groups * CHANNELS, r, s), np.int64)
    wp[:, :c] = w
    ops = []
    for g in range(groups):
        ch = slice(g * CHANNELS, (g + 1) * CHANNELS)
        for i in range(r):
            for j in range(s):
                rows = slice(i * dy, i * dy + (oh - 1) * sy + 1, sy)
                cols = slice(j * dx, j * dx + (ow - 1) * sx + 1, sx)
                dat = np.broadcast_to(xp[ch, rows, cols].transpose(1, 2, 0), (k, oh, ow, 64))
                wt = np.broadcast_to(wp[:, ch, i, j][:, None, None, :], (k, oh, ow, 64))
                ops.append(np.concatenate([dat, wt], axis=-1))
    return np.stack(ops, axis=3), (oh, ow)


def run_harness(exe: Path, x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """The cmod's fp32 words ``[K, OH, OW]`` (uint32)."""
    ops, (oh, ow) = atomic_ops(x, w, attrs)
    k, t = w.shape[0], ops.shape[3]
    flat = ops.reshape(-1, t * 128)
    lines = [str(len(flat))] + [f"{t} " + " ".join(map(str, row)) for row in flat.tolist()]
    result = subprocess.run(
        [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False,
        timeout=600,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"harness failed ({result.returncode}): {result.stderr.strip()}")
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("Y ")]
    if len(rows) != len(flat) or any(r[2] != "0" for r in rows):
        raise RuntimeError(f"harness: {len(rows)} of {len(flat)} outputs, or a self-check failed")
    return np.array([int(r[1]) for r in rows], np.uint32).reshape(k, oh, ow)


# --- drawing cases -------------------------------------------------------------------------------

SPECIALS = (0x0000, 0x8000, 0x0001, 0x83FF, 0x0200, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x3C00)
NANS = (0x7C01, 0x7E00, 0x7E01, 0xFD02, 0xFFFF, 0x7FFF)
MODES = ("normal", "wide exponents", "cancelling", "specials", "random words", "nans")


def draw_words(rng: np.random.Generator, shape: tuple, mode: str) -> np.ndarray:
    """fp16 words (uint16) of the given kind."""
    n = int(np.prod(shape))
    if mode == "random words":  # most NaNs turned into finite words or Inf
        x = rng.integers(0, 1 << 16, n).astype(np.uint16)
        nan = ((x >> 10) & 31 == 31) & (x & 0x3FF != 0) & (rng.random(n) < 0.9)
        x[nan] ^= 0x4000
    elif mode == "wide exponents":  # block-exponent shifts of 32 and more
        wide = rng.standard_normal(n) * 2.0 ** rng.integers(-24, 16, n)
        x = np.clip(wide, -65504, 65504).astype(np.float16).view(np.uint16)
    else:
        x = rng.standard_normal(n).astype(np.float16).view(np.uint16)
    if mode in ("specials", "nans"):
        pick = rng.random(n) < 0.3
        x[pick] = rng.choice(np.array(SPECIALS, np.uint16), int(pick.sum()))
    if mode == "nans":  # a few NaNs with payloads, so that most outputs stay finite
        x[rng.integers(0, n, int(rng.integers(1, 3)))] = rng.choice(np.array(NANS, np.uint16))
    x[rng.random(n) < 0.1] = rng.choice(np.array([0, 0x8000], np.uint16))
    return x.reshape(shape)


def _geometry(rng: np.random.Generator, index: int) -> tuple[dict, tuple, tuple]:
    while True:
        c = int(rng.choice([1, 3, 16, 63, 64, 65, 100, 128, 129, 200]))
        k = int(rng.choice([1, 5, 16, 17, 20])) if index % 4 else 16
        r, s = (int(v) for v in rng.integers(1, 4, 2))
        h, wd = (int(v) for v in rng.integers(1, 6, 2))
        attrs = dict(zip(GEOMETRY, (int(v) for v in rng.integers(1, 3, 4)), strict=True))
        pads = [int(v) for v in rng.integers(0, 3, 4)] if rng.random() < 0.6 else [0] * 4
        attrs |= dict(zip(PADS, pads, strict=True))
        attrs["PAD_VALUE"] = int(rng.choice([0, 0x3C00, int(rng.integers(0, 1 << 16))]))
        if index < 4:  # the plain case: stride 1, no padding, no dilation
            attrs |= dict.fromkeys(GEOMETRY, 1) | dict.fromkeys(PADS, 0)
        pl, pt, pr, pb = (attrs[p] for p in PADS)
        oh = (h + pt + pb - (r - 1) * attrs["DILATION_Y"] - 1) // attrs["STRIDE_Y"] + 1
        ow = (wd + pl + pr - (s - 1) * attrs["DILATION_X"] - 1) // attrs["STRIDE_X"] + 1
        small = k * c * r * s <= 8000 and k * oh * ow * -(-c // 64) * r * s <= 6000
        if oh >= 1 and ow >= 1 and small:
            return attrs, (c, h, wd), (k, c, r, s)


def draw_case(rng: np.random.Generator, index: int) -> tuple[dict, np.ndarray, np.ndarray, str]:
    """One layer: the attrs, X ``[C, H, W]``, W ``[K, C, R, S]`` (uint16 words) and a note."""
    attrs, xs, ws = _geometry(rng, index)
    mode = MODES[index % len(MODES)]
    x = draw_words(rng, xs, mode)
    w = draw_words(rng, ws, mode if mode != "cancelling" else "normal")
    if mode == "cancelling":  # pairs of channels whose products cancel (up to rounding)
        half = xs[0] // 2
        if half:
            x[half : 2 * half] = x[:half]
            w[:, half : 2 * half] = w[:, :half] ^ 0x8000
    note = (
        f"FP16 {mode}: C={xs[0]} {xs[1]}x{xs[2]}, K={ws[0]} {ws[2]}x{ws[3]} kernel, stride "
        f"{attrs['STRIDE_Y']}x{attrs['STRIDE_X']}, dilation {attrs['DILATION_Y']}x"
        f"{attrs['DILATION_X']}, pads l/t/r/b={'/'.join(str(attrs[p]) for p in PADS)}, "
        f"PAD_VALUE=0x{attrs['PAD_VALUE']:04x}"
    )
    return attrs, x, w, note


def _tensor(dtype: str, a: np.ndarray, bits: bool = False) -> dict:
    t = {"dtype": dtype, "shape": list(a.shape), "data": a.ravel().tolist()}
    if bits:
        t["bits"] = True
    return t


def generate(seed: int, n_cases: int, exe: Path) -> list[dict]:
    """``n_cases`` cases for ``seed``, run through the harness."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(n_cases):
        attrs, x, w, note = draw_case(rng, index)
        y = run_harness(exe, x, w, attrs)
        records.append({
            "id": f"nvdla/conv_fp16/s{seed}-{index:05d}",
            "backend": "nvdla",
            "op": "conv_fp16",
            "attrs": attrs,
            "inputs": {"X": _tensor("float16", x, True), "W": _tensor("float16", w, True)},
            "expected": {"Y": _tensor("uint32", y)},
            "source": SOURCE,
            "note": note,
        })  # fmt: skip
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--cases", type=int, default=40, help="number of cases (default 40)")
    parser.add_argument("--hw", type=Path, help="nvdla/hw checkout or mirror")
    parser.add_argument("--systemc", type=Path, help="SystemC prefix (include/, lib/)")
    parser.add_argument("--build-dir", type=Path, help="where to build (default: a temp folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nvdla_cc_fp16_") as tmp:
        try:
            exe = build(args.hw, args.build_dir or Path(tmp), args.systemc)
        except (CmodUnavailable, RuntimeError, subprocess.SubprocessError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        records = generate(args.seed, args.cases, exe)
        path = args.out / "conv_fp16.jsonl.gz"
        write_jsonl_gz(records, path)
        print(f"wrote {len(records)} cases to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
