"""Generate NVDLA PDP FP16 (pooling) conformance vectors from NVIDIA's own C model, for any seed.

    python tools/make_nvdla_pdp_fp16_vectors.py --seed 0 --out tests/data/nvdla_pdp_fp16
    python tools/make_nvdla_pdp_fp16_vectors.py --seed 3 --out /tmp/s3 [--cases 50] [--hw PATH]

What it writes: ``pdp_avg.jsonl.gz``, ``pdp_max.jsonl.gz`` and ``pdp_min.jsonl.gz`` (``--cases``
each, default 50) in the format of the INT PDP vectors (``shared/conformance/nvdla/pdp_*.jsonl``,
``conformance/nvdla.md`` §4): ops ``pdp_avg``/``pdp_max``/``pdp_min`` of backend ``nvdla``, every
``PdpRegisters`` field as attrs with ``INPUT_DATA = 2`` (FP16) plus the FP16 fields
``FLYING_MODE`` and ``NAN_TO_ZERO``; ``X`` ``[C, H, W]`` as float16 bits; ``Y`` ``[C, OH, OW]`` as
int16 (the fp16 output words). ``PAD_VALUE_<n>X`` (19-bit) and ``RECIP_KERNEL_*`` (17-bit) are
fp17 bit patterns in FP16 mode: realistic (``n * pad`` and ``1 / k`` rounded to fp17) or random.
Case ids are ``nvdla/pdp_fp16_<avg|max|min>/s{seed}-{index:05d}``; each ``note`` names the kind.
Deterministic for a seed (NumPy ``default_rng(seed)``, gzip with mtime 0).

Edge cases: kernels 1-8 by 1-8 (width 8 only without top/bottom padding: the cmod reads
``kernel_width_map[8]`` past the table there, see ``nvdla/fp16/pdp.py``), strides 1-4, pads on every
side, one-row/one-column cubes, global pooling, 1-40 channels; data with +-0, subnormals,
+-65504, +-Inf, NaNs with payloads (both signs, quiet and signalling), all-random words and
saturating sums; ``FLYING_MODE``/``NAN_TO_ZERO`` random.

How the expected values are computed: :func:`build` extracts, with ``git show COMMIT:path``, from
nvdla/hw ``nvdlav1`` at :data:`COMMIT` (a bare mirror or checkout: ``--hw``, else
``$QUANTEMU_NVDLA_HW``, else ``/work/.mirror/nvdla+hw/repo``) the HLS cores
``cmod/hls_wrapper/pdp_hls_wrapper.cpp`` and the six ``cmod/hls/vlibs`` files it calls (compiled
unchanged), their headers (``ac_fixed.h`` with the one syntax patch of
``nvdla_cmod_fp.py``), and three include files cut verbatim from
``cmod/pdp/NV_NVDLA_pdp.h``/``.cpp`` (:data:`LINE_RANGES`: the defines and the PDP sequencer);
then compiles ``tools/nvdla_pdp_fp16_harness.cpp`` (which runs the sequencer verbatim in a
stand-in class; no arithmetic of its own) with ``g++ -std=c++98 -O1``. Each case runs in a fresh
process. The harness needs ``ceil(C / 16) * OH * OW <= 256`` (no line-buffer wrap); cases are
drawn within it.

Needs: g++ (C++98), git, the nvdla/hw sources at :data:`COMMIT`, NumPy. Nothing of quantemu.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/ is not a package
from nvdla_cmod_fp import COMMIT, CmodUnavailable
from nvdla_cmod_src import (
    ARNVDLA,
    HLS_HEADERS,
    compile_harness,
    cut_lines,
    require_cxx,
    show_text,
    sources,
    write_jsonl_gz,
    write_sources,
    write_stubs,
)

HARNESS_CPP = Path(__file__).resolve().with_name("nvdla_pdp_fp16_harness.cpp")
TOOL = "tools/make_nvdla_pdp_fp16_vectors.py"
VLIBS = ("fp16_max", "fp16_min", "fp16_to_fp17", "fp17_add", "fp17_mul", "fp17_to_fp16")
CMOD_SOURCES = (
    "cmod/hls_wrapper/pdp_hls_wrapper.cpp",
    *(f"cmod/hls/vlibs/{name}.cpp" for name in VLIBS),
)
CMOD_HEADERS = (*HLS_HEADERS, "cmod/hls/vlibs/vlibs.h", "cmod/hls_wrapper/pdp_hls_wrapper.h",
                *ARNVDLA)  # fmt: skip
#: generated include file -> (source, [(first line, last line), ...]), 1-based, inclusive
LINE_RANGES = {
    "pdp_h_defines.inc": ("cmod/pdp/NV_NVDLA_pdp.h", ((29, 79),)),
    "pdp_cpp_defines.inc": ("cmod/pdp/NV_NVDLA_pdp.cpp", ((21, 30),)),
    "pdp_sequencer.inc": (
        "cmod/pdp/NV_NVDLA_pdp.cpp",
        ((425, 658), (666, 797), (1425, 1748), (1775, 1865)),
    ),
}
#: first line of each sequencer range, checked before it is used
RANGE_STARTS = {
    425: "void NV_NVDLA_pdp::PoolingStage0SequenceCommon(",
    666: "void NV_NVDLA_pdp::PoolingStage1SequenceCommon(",
    1425: "template <typename T_IN, typename T_OUT, typename T_PAD>",
}
HARNESS_NAME = "nvdla_pdp_fp16_harness"
SOURCE = (
    f"NVDLA cmod (nvdla/hw nvdlav1 {COMMIT}), x86 build: cmod/hls_wrapper/pdp_hls_wrapper.cpp + "
    "cmod/hls/vlibs, PDP sequencer of cmod/pdp/NV_NVDLA_pdp.cpp verbatim; driven by "
    f"{TOOL} + tools/nvdla_pdp_fp16_harness.cpp"
)
PAD_VALUES = tuple(f"PAD_VALUE_{n}X" for n in range(1, 8))
#: every PdpRegisters field, in its order (the attrs of a case)
FIELDS = (
    *("INPUT_DATA", "POOLING_METHOD", "SPLIT_NUM", "CUBE_IN_WIDTH", "CUBE_IN_HEIGHT"),
    *("CUBE_IN_CHANNEL", "CUBE_OUT_WIDTH", "CUBE_OUT_HEIGHT", "CUBE_OUT_CHANNEL"),
    *("KERNEL_WIDTH", "KERNEL_HEIGHT", "KERNEL_STRIDE_WIDTH", "KERNEL_STRIDE_HEIGHT"),
    *("PAD_LEFT", "PAD_TOP", "PAD_RIGHT", "PAD_BOTTOM", *PAD_VALUES),
    *("RECIP_KERNEL_WIDTH", "RECIP_KERNEL_HEIGHT", "FLYING_MODE", "NAN_TO_ZERO"),
)
#: the harness's register order (see its header)
HARNESS_REGS = (
    *("CUBE_IN_WIDTH", "CUBE_IN_HEIGHT", "CUBE_IN_CHANNEL", "CUBE_OUT_WIDTH", "CUBE_OUT_HEIGHT"),
    *("POOLING_METHOD", "FLYING_MODE", "NAN_TO_ZERO", "KERNEL_WIDTH", "KERNEL_HEIGHT"),
    *("KERNEL_STRIDE_WIDTH", "KERNEL_STRIDE_HEIGHT", "PAD_LEFT", "PAD_TOP", "PAD_RIGHT"),
    *("PAD_BOTTOM", "RECIP_KERNEL_WIDTH", "RECIP_KERNEL_HEIGHT", *PAD_VALUES),
)
OPS = ((0, "pdp_avg", "avg"), (1, "pdp_max", "max"), (2, "pdp_min", "min"))
LINE_BUFFER_ATOMS = 256


# --- extracting and building the harness ---------------------------------------------------------


def _cut(text: str, path: str, ranges) -> str:
    """The ``ranges`` of ``text``, each range's first line checked where it is listed in
    :data:`RANGE_STARTS`."""
    return "".join(
        cut_lines(text, path, a, b, RANGE_STARTS.get(a, "") if path.endswith(".cpp") else "")
        for a, b in ranges
    )


def extract(hw: Path | None, dest: Path) -> Path:
    """Write the cmod files, the generated include files and the stubs into ``dest``."""
    git = sources(hw)
    write_sources(git, CMOD_SOURCES + CMOD_HEADERS, dest)
    for name, (path, ranges) in LINE_RANGES.items():
        (dest / name).write_text(_cut(show_text(git, path), path, ranges), encoding="latin-1")
    write_stubs(dest, systemc=True)
    return dest


def build(hw: Path | None = None, out_dir: Path | None = None) -> Path:
    """Extract the cmod at :data:`COMMIT` and compile the harness; return the executable's path."""
    require_cxx()
    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="nvdla_pdp_fp16_"))
    src = extract(hw, out_dir / "src")
    return compile_harness(HARNESS_CPP, src, CMOD_SOURCES, out_dir / HARNESS_NAME)


def run_harness(exe: Path, attrs: dict, x: np.ndarray) -> np.ndarray:
    """The cmod's output words ``[C, OH, OW]`` (uint16) for ``x`` ``[C, H, W]`` (uint16)."""
    c, h, w = x.shape
    s = (c + 15) // 16
    atoms = np.zeros((s * 16, h, w), np.uint16)
    atoms[:c] = x
    atoms = atoms.reshape(s, 16, h, w).transpose(0, 2, 3, 1)  # [S][H][W][16]
    text = " ".join(str(attrs[n]) for n in HARNESS_REGS) + "\n"
    text += " ".join(map(str, atoms.ravel().tolist())) + "\n"
    result = subprocess.run(
        [str(exe)], input=text, capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"harness failed ({result.returncode}): {result.stderr.strip()}")
    words = next(line for line in result.stdout.splitlines() if line.startswith("Y")).split()[1:]
    oh, ow = attrs["CUBE_OUT_HEIGHT"] + 1, attrs["CUBE_OUT_WIDTH"] + 1
    y = np.array([int(v) for v in words], np.uint16).reshape(s, oh, ow, 16)
    return y.transpose(0, 3, 1, 2).reshape(s * 16, oh, ow)[:c]


# --- drawing cases -------------------------------------------------------------------------------


def fp17_of(value: float) -> int:
    """``value`` rounded half to even to an fp17 word (1 sign, 6 exponent bits biased by 31, 10
    mantissa bits); normal fp17 range only.

    >>> [hex(fp17_of(v)) for v in (1.0, 0.5, 1 / 3, -2.0, 0.0)]
    ['0x7c00', '0x7800', '0x7555', '0x18000', '0x0']
    """
    if value == 0:
        return 0
    m, e = math.frexp(abs(value))  # |value| = m * 2^e, 0.5 <= m < 1
    sig = round(m * 2048)  # 11 significant bits, half to even (exact: m * 2^11 is a double)
    if sig == 2048:
        sig, e = 1024, e + 1
    expo = e - 1 + 31
    if not 1 <= expo <= 62:
        raise ValueError(f"{value} is outside the normal fp17 range")
    return (value < 0) << 16 | expo << 10 | (sig - 1024)


SPECIALS = (0x0000, 0x8000, 0x0001, 0x83FF, 0x0200, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00)
NANS = (0x7C01, 0x7E00, 0x7E01, 0xFD02, 0xFFFF, 0x7FFF)
DATA_MODES = ("normal", "specials", "nans", "random words", "saturating", "subnormal")


def draw_data(rng: np.random.Generator, n: int, mode: str) -> np.ndarray:
    """``n`` fp16 words of the given kind."""
    if mode == "normal":
        return rng.standard_normal(n).astype(np.float16).view(np.uint16)
    if mode == "random words":
        return rng.integers(0, 1 << 16, n).astype(np.uint16)
    if mode == "saturating":  # near +-65504: sums beyond fp16, saturated by Fp17ToFp16
        sign = np.where(rng.random(n) < 0.8, 0, 0x8000)
        return (sign | rng.integers(0x7B00, 0x7C00, n)).astype(np.uint16)
    if mode == "subnormal":
        return (rng.integers(0, 2, n) << 15 | rng.integers(0, 0x400, n)).astype(np.uint16)
    wide = rng.standard_normal(n) * 2.0 ** rng.integers(-24, 16, n)
    x = np.clip(wide, -65504, 65504).astype(np.float16).view(np.uint16)
    pool = SPECIALS + (NANS if mode == "nans" else ())
    pick = rng.random(n) < (0.3 if mode == "nans" else 0.4)
    x[pick] = rng.choice(np.array(pool, np.uint16), int(pick.sum()))
    return x


def _geometry(rng: np.random.Generator, index: int) -> dict:
    """Kernel, strides, pads and sizes; kernel width cycles 1..8 over the cases."""
    while True:
        kw, kh = index % 8 + 1, int(rng.integers(1, 9))
        sw, sh = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        pads = [int(rng.integers(0, k)) for k in (kw, kh, kw, kh)]  # left, top, right, bottom
        if rng.random() < 0.25:
            pads = [0, 0, 0, 0]
        if kw == 8:
            pads[1] = pads[3] = 0  # the cmod's kernel_width_map[8] is out of bounds
        w, h = int(rng.integers(1, 11)), int(rng.integers(1, 11))
        if index % 10 == 9:  # global pooling of a small cube
            w, h, sw, sh, pads = kw, kh, 1, 1, [0, 0, 0, 0]
        c = int(rng.choice([1, 2, 3, 8, 16, 17, 24, 33, 40]))
        pl, pt, pr, pb = pads
        if pl + w + pr < kw or pt + h + pb < kh:
            continue
        ow, oh = (pl + w + pr - kw) // sw + 1, (pt + h + pb - kh) // sh + 1
        if (c + 15) // 16 * oh * ow <= LINE_BUFFER_ATOMS:
            return dict(c=c, h=h, w=w, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads)


def _pad_recip(rng: np.random.Generator, g: dict) -> tuple[list[int], int, int, str]:
    """PAD_VALUE_1X..7X and the reciprocals: realistic fp17 values or random bit patterns."""
    pad = float(rng.standard_normal() * 2.0 ** int(rng.integers(-6, 6)))
    roll = rng.random()
    if roll < 0.3:
        pads, kind = [0] * 7, "zero pads"
    elif roll < 0.8:
        pads, kind = [fp17_of(n * pad) for n in range(1, 8)], f"pads n*{pad:.4g}"
    else:
        pads, kind = [int(v) for v in rng.integers(0, 1 << 19, 7)], "random pad words"
    if rng.random() < 0.75:
        rw, rh = fp17_of(1 / g["kw"]), fp17_of(1 / g["kh"])
        kind += ", reciprocals 1/k"
    else:
        rw, rh = (int(v) for v in rng.integers(0, 1 << 17, 2))
        kind += ", random reciprocal words"
    return pads, rw, rh, kind


def draw_case(rng: np.random.Generator, method: int, index: int) -> tuple[dict, np.ndarray, str]:
    """One layer: the attrs, X ``[C, H, W]`` (uint16 words) and a note."""
    g = _geometry(rng, index)
    pl, pt, pr, pb = g["pads"]
    pads, rw, rh, kind = _pad_recip(rng, g) if method == 0 else ([0] * 7, 1 << 16, 1 << 16, "")
    if method != 0 and rng.random() < 0.5:  # unused by max/min: random words
        pads, kind = [int(v) for v in rng.integers(0, 1 << 19, 7)], "random (unused) pad words"
    mode = DATA_MODES[index % len(DATA_MODES)]
    regs = [2, method, 0, g["w"] - 1, g["h"] - 1, g["c"] - 1, g["ow"] - 1, g["oh"] - 1]
    regs += [g["c"] - 1, g["kw"] - 1, g["kh"] - 1, g["sw"] - 1, g["sh"] - 1, pl, pt, pr, pb]
    regs += [*pads, rw, rh, int(rng.integers(0, 2)), int(rng.integers(0, 2))]
    attrs = dict(zip(FIELDS, regs, strict=True))
    x = draw_data(rng, g["c"] * g["h"] * g["w"], mode).reshape(g["c"], g["h"], g["w"])
    note = (
        f"FP16 {mode}: {g['kw']}x{g['kh']} kernel stride {g['sw']}x{g['sh']}, pads l/t/r/b="
        f"{pl}/{pt}/{pr}/{pb}, C={g['c']} {g['h']}x{g['w']} -> {g['oh']}x{g['ow']}, "
        f"FLYING_MODE={attrs['FLYING_MODE']} NAN_TO_ZERO={attrs['NAN_TO_ZERO']}"
        + (f"; {kind}" if kind else "")
    )
    return attrs, x, note


def _tensor(dtype: str, a: np.ndarray, bits: bool = False) -> dict:
    t = {"dtype": dtype, "shape": list(a.shape), "data": a.ravel().tolist()}
    if bits:
        t["bits"] = True
    return t


def generate(seed: int, n_cases: int, exe: Path) -> dict[str, list[dict]]:
    """``n_cases`` cases per operator for ``seed``, run through the harness: op -> records."""
    rng = np.random.default_rng(seed)
    out = {}
    for method, op, short in OPS:
        records = []
        for index in range(n_cases):
            attrs, x, note = draw_case(rng, method, index)
            y = run_harness(exe, attrs, x)
            records.append({
                "id": f"nvdla/pdp_fp16_{short}/s{seed}-{index:05d}",
                "backend": "nvdla",
                "op": op,
                "attrs": attrs,
                "inputs": {"X": _tensor("float16", x, bits=True)},
                "expected": {"Y": _tensor("int16", y.view(np.int16))},
                "source": SOURCE,
                "note": note,
            })  # fmt: skip
        out[op] = records
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--cases", type=int, default=50, help="cases per operator (default 50)")
    parser.add_argument("--hw", type=Path, help="nvdla/hw checkout or mirror")
    parser.add_argument("--build-dir", type=Path, help="where to build (default: a temp folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nvdla_pdp_fp16_") as tmp:
        try:
            exe = build(args.hw, args.build_dir or Path(tmp))
        except (CmodUnavailable, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for op, records in generate(args.seed, args.cases, exe).items():
            path = args.out / f"{op}.jsonl.gz"
            write_jsonl_gz(records, path)
            print(f"wrote {len(records)} cases to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
