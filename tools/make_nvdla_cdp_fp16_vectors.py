"""Generate NVDLA CDP (LRN) FP16 conformance vectors from NVIDIA's own C model, for any seed.

    python tools/make_nvdla_cdp_fp16_vectors.py --seed 1 --out /tmp/s1 [--cases 80] [--hw PATH]

Writes ``OUT/cdp.jsonl.gz`` in the format of the INT ``cdp`` vectors (``shared/conformance/
nvdla.md`` §3, ``FORMAT.md``): op ``cdp`` of backend ``nvdla``, the 33 CDP register fields as
attrs with ``INPUT_DATA_TYPE = 2`` (every field present; the ones the FP16 path ignores, DATIN_*,
DATOUT_*, the slope shifts and the START/END ``_HIGH`` bits, random), ``X`` one pixel's ``C + 8``
channels as float16 bits (a 4-channel halo on each side, C a multiple of 4), ``LUT_LE`` (65) and
``LUT_LO`` (257) as float16 bits, and the expected ``Y`` (C int16 output words) and the six
counters. Case ids are ``nvdla/cdp_fp16/s{seed}-{index:05d}``; each ``note`` names the kind.
Deterministic for a seed (``random.Random(seed)``, gzip with mtime 0).

Kinds, in turn: realistic LRN (LE exponent table of ``(k + a·2^i)^-b``, LO linear, realistic
registers and data), edge data (±0, subnormals, ±65504, ±Inf, NaNs with payloads, smallest
normals), flows (START/END placed so that the sums under/overflow or hit each table, under all
eight priority combinations), bypasses (SQSUM and/or MUL, NaN inputs), LE linear, and random
tables/registers (raw words: NaN/Inf table entries, extreme selects and offsets); NORMALZ_LEN
cycles through 0..3.

How the expected values are computed: the cmod files of https://github.com/nvdla/hw branch
``nvdlav1`` at commit ``COMMIT`` (read with ``git show`` from ``--hw``, ``$QUANTEMU_NVDLA_HW`` or
``/work/.mirror/nvdla+hw/repo``, as ``tools/make_nvdla_fp16_vectors.py``): :data:`CMOD_SOURCES`
compiled unchanged (``g++ -std=c++98 -O1``) with :data:`CMOD_HEADERS` (``ac_fixed.h`` with the
one-token syntax patch of the SDP generator), a stub ``log.h`` and an empty ``systemc.h`` (no
arithmetic), and ``tools/nvdla_cdp_fp16_harness.cpp``, which calls ``HLS_CDP_lookup_fp16`` on
each 12-channel window and prints its words and counters (no arithmetic of its own); this script
sums the per-window counters. NAN_TO_ZERO (a sequencer step before the window) is not used.

Needs: g++, git, the nvdla/hw sources, NumPy. Nothing of quantemu.
"""

from __future__ import annotations

import argparse
import random
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
    require_cxx,
    sources,
    write_jsonl_gz,
    write_sources,
    write_stubs,
)

HARNESS_CPP = Path(__file__).resolve().with_name("nvdla_cdp_fp16_harness.cpp")
TOOL = "tools/make_nvdla_cdp_fp16_vectors.py"
_VLIBS = [
    f"{a}_{b}"
    for a, b in (("fp16", "add"), ("fp16", "max"), ("fp16", "min"), ("fp16", "mul"),
                 ("fp16", "sub"), ("fp16", "to_fp17"), ("fp16", "to_fp32"), ("fp17", "add"),
                 ("fp17", "max"), ("fp17", "min"), ("fp17", "mul"), ("fp17", "sub"),
                 ("fp17", "to_fp16"), ("fp17", "to_fp32"), ("fp32", "add"), ("fp32", "mul"),
                 ("fp32", "sub"), ("fp32", "to_fp16"), ("fp32", "to_fp17"), ("uint16", "to_fp17"))
]  # fmt: skip  # every cmod/hls/vlibs/*.cpp
CMOD_SOURCES = (
    "cmod/hls_wrapper/cdp_hls_wrapper.cpp",
    "cmod/hls_wrapper/cdp_icvt_wrapper.cpp",
    "cmod/hls_wrapper/cdp_ocvt_wrapper.cpp",
    "cmod/hls/cdp_libs/cdp_icvt.cpp",
    "cmod/hls/cdp_libs/cdp_ocvt.cpp",
    "cmod/hls/cdp_libs/cdp_sq.cpp",
    *(f"cmod/hls/vlibs/{name}.cpp" for name in _VLIBS),
)
CMOD_HEADERS = (
    *HLS_HEADERS,
    "cmod/hls/vlibs/vlibs.h",
    "cmod/hls/cdp_libs/cdp_icvt.h",
    "cmod/hls/cdp_libs/cdp_ocvt.h",
    "cmod/hls/cdp_libs/cdp_sq.h",
    "cmod/hls_wrapper/cdp_hls_wrapper.h",
    *ARNVDLA,
)
SOURCE = (
    f"NVDLA cmod (nvdla/hw nvdlav1 {COMMIT}), x86 build: HLS_CDP_lookup_fp16 of "
    "cmod/hls_wrapper/cdp_hls_wrapper.cpp with cmod/hls/cdp_libs and cmod/hls/vlibs; driven by "
    f"{TOOL} + tools/nvdla_cdp_fp16_harness.cpp"
)
FIELDS = [
    "INPUT_DATA_TYPE",
    "NORMALZ_LEN",
    "SQSUM_BYPASS",
    "MUL_BYPASS",
    "DATIN_OFFSET",
    "DATIN_SCALE",
    "DATIN_SHIFTER",
    "DATOUT_OFFSET",
    "DATOUT_SCALE",
    "DATOUT_SHIFTER",
    "LUT_LE_FUNCTION",
    "LUT_UFLOW_PRIORITY",
    "LUT_OFLOW_PRIORITY",
    "LUT_HYBRID_PRIORITY",
    "LUT_LE_INDEX_OFFSET",
    "LUT_LE_INDEX_SELECT",
    "LUT_LO_INDEX_SELECT",
    "LUT_LE_START_LOW",
    "LUT_LE_START_HIGH",
    "LUT_LE_END_LOW",
    "LUT_LE_END_HIGH",
    "LUT_LO_START_LOW",
    "LUT_LO_START_HIGH",
    "LUT_LO_END_LOW",
    "LUT_LO_END_HIGH",
    "LUT_LE_SLOPE_UFLOW_SCALE",
    "LUT_LE_SLOPE_OFLOW_SCALE",
    "LUT_LE_SLOPE_UFLOW_SHIFT",
    "LUT_LE_SLOPE_OFLOW_SHIFT",
    "LUT_LO_SLOPE_UFLOW_SCALE",
    "LUT_LO_SLOPE_OFLOW_SCALE",
    "LUT_LO_SLOPE_UFLOW_SHIFT",
    "LUT_LO_SLOPE_OFLOW_SHIFT",
]
WIDTHS = dict(zip(FIELDS, (2, 2, 1, 1, 16, 16, 5, 32, 16, 6, 1, 1, 1, 1, 8, 8, 8, 32, 6, 32, 6,
                           32, 6, 32, 6, 16, 16, 5, 5, 16, 16, 5, 5), strict=True))  # fmt: skip
COUNTERS = ("PERF_LUT_UFLOW", "PERF_LUT_OFLOW", "PERF_LUT_LE_HIT", "PERF_LUT_LO_HIT",
            "PERF_LUT_HYBRID")  # fmt: skip  # the harness's CNT order
EDGE_WORDS = (0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00,
              0xFC00, 0x7E00, 0x7C01, 0xFE11, 0x3C00, 0xBC00)  # fmt: skip
KINDS = ("realistic", "edge", "flows", "bypass", "le_linear", "random")


# --- building the harness ------------------------------------------------------------------------


def build(hw: Path | None, out_dir: Path) -> Path:
    """Extract the cmod at ``COMMIT`` into ``out_dir`` and compile the harness; its path."""
    require_cxx()
    src = out_dir / "src"
    write_sources(sources(hw), CMOD_SOURCES + CMOD_HEADERS, src)
    write_stubs(src, systemc=True)
    return compile_harness(HARNESS_CPP, src, CMOD_SOURCES, out_dir / "nvdla_cdp_fp16_harness")


def run_case(exe: Path, attrs: dict, x: list, le: list, lo: list) -> dict:
    """The cmod's outputs of one case: ``{"Y": [int16...], counter: int, ...}``."""
    a = attrs
    cfg = [a["NORMALZ_LEN"], a["LUT_LE_FUNCTION"], a["LUT_UFLOW_PRIORITY"],
           a["LUT_OFLOW_PRIORITY"], a["LUT_HYBRID_PRIORITY"], a["LUT_LE_INDEX_OFFSET"],
           a["LUT_LE_INDEX_SELECT"], a["LUT_LO_INDEX_SELECT"], a["LUT_LE_SLOPE_UFLOW_SCALE"],
           a["LUT_LE_SLOPE_OFLOW_SCALE"], a["LUT_LO_SLOPE_UFLOW_SCALE"],
           a["LUT_LO_SLOPE_OFLOW_SCALE"], a["SQSUM_BYPASS"], a["MUL_BYPASS"]]  # fmt: skip
    se = [a[f"LUT_{n}_HIGH"] << 32 | a[f"LUT_{n}_LOW"] for n in ("LE_START", "LE_END",
                                                               "LO_START", "LO_END")]  # fmt: skip
    text = "\n".join([
        "CFG " + " ".join(map(str, cfg)), "SE " + " ".join(map(str, se)),
        "LE " + " ".join(map(str, le)), "LO " + " ".join(map(str, lo)),
        f"X {len(x)} " + " ".join(map(str, x)),
    ]) + "\n"  # fmt: skip
    result = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=False,
                            timeout=120)  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"harness failed ({result.returncode}): {result.stderr.strip()}")
    out: dict = {"Y": [], **dict.fromkeys(COUNTERS, 0), "OUT_SATURATION": 0}
    for line in result.stdout.splitlines():
        key, *values = line.split()
        if key == "Y":
            out["Y"] += [int(v) - 65536 if int(v) >= 32768 else int(v) for v in values]
        else:
            for name, v in zip(COUNTERS, values, strict=True):
                out[name] += int(v)
    if len(out["Y"]) != len(x) - 8:
        raise RuntimeError(f"harness gave {len(out['Y'])} outputs for {len(x) - 8} channels")
    return out


# --- drawing cases -------------------------------------------------------------------------------


def h16(v: float) -> int:
    """A float as fp16 bits (NumPy's IEEE RNE; saturating to ±Inf)."""
    with np.errstate(over="ignore"):
        return int(np.array([v], np.float64).astype(np.float16).view(np.uint16)[0])


def w32(v: float) -> int:
    """A float as fp32 bits."""
    return int(np.array([v], np.float64).astype(np.float32).view(np.uint32)[0])


def _data(r: random.Random, n: int, kind: str) -> list[int]:
    scale = (
        r.choice([0.01, 0.3, 2.0, 16.0, 200.0]) if kind != "random" else 2.0 ** r.randint(-14, 15)
    )
    x = [h16(r.gauss(0.0, scale)) for _ in range(n)]
    if kind in ("edge", "bypass") or r.random() < 0.2:
        for i in r.sample(range(n), k=max(1, n // 3)):
            x[i] = r.choice(EDGE_WORDS)
    if kind == "random":
        x = [r.getrandbits(16) if r.random() < 0.5 else w for w in x]
    if r.random() < 0.3:  # a real cube edge: the halo is +0 on one side
        side = r.choice([range(0, 4), range(n - 4, n)])
        for i in side:
            x[i] = 0
    return x


def _realistic(r: random.Random, attrs: dict, linear_le: bool) -> tuple[list, list]:
    """LRN tables ``(k + a·u)^-b`` with their registers (u: the square sum)."""
    k, a, b = r.choice([1.0, 2.0]), r.choice([1e-4, 1e-3, 0.01, 0.1]), r.choice([0.75, 0.5])
    lrn = lambda u: (k + a * u) ** -b  # noqa: E731
    off, le_sel, lo_sel = r.randint(-10, 6), r.randint(-4, 8), r.randint(-8, 6)
    le_start = 0.0 if not linear_le else r.choice([0.0, 0.5, 4.0])
    lo_start = r.choice([0.0, 0.25, 1.0])
    if linear_le:
        le = [h16(lrn(le_start + i * 2.0**le_sel)) for i in range(65)]
        le_end = le_start + 64 * 2.0**le_sel
    else:
        le = [h16(lrn(2.0 ** (off + i))) for i in range(65)]
        le_end = 2.0 ** (off + 64)
    lo = [h16(lrn(lo_start + i * 2.0**lo_sel)) for i in range(257)]
    attrs.update(LUT_LE_INDEX_OFFSET=off & 0xFF, LUT_LE_INDEX_SELECT=le_sel & 0xFF,
                 LUT_LO_INDEX_SELECT=lo_sel & 0xFF, LUT_LE_START_LOW=w32(le_start),
                 LUT_LE_END_LOW=w32(min(le_end, 3e38)), LUT_LO_START_LOW=w32(lo_start),
                 LUT_LO_END_LOW=w32(lo_start + 256 * 2.0**lo_sel))  # fmt: skip
    slope = -a * b * k ** (-b - 1)  # d/du of the table at u = 0
    for name in ("LE_SLOPE_UFLOW", "LO_SLOPE_UFLOW"):
        attrs[f"LUT_{name}_SCALE"] = h16(slope)
    for name in ("LE_SLOPE_OFLOW", "LO_SLOPE_OFLOW"):
        attrs[f"LUT_{name}_SCALE"] = h16(slope * r.choice([0.0, 1e-3, 0.1]))
    return le, lo


def _flows(r: random.Random, attrs: dict, x: list) -> None:
    """START/END around the data's square sums: under/overflow or hits in each table."""
    sq = [float(np.array([w], np.uint16).view(np.float16)[0]) ** 2 for w in x]
    sums = sorted(s for s in sq if np.isfinite(s)) or [1.0]
    mid = sums[len(sums) // 2]
    for t in ("LE", "LO"):
        start = r.choice([0.0, mid * r.choice([0.5, 1.0, 2.0, 8.0]), -mid])
        sel = r.randint(-6, 10)
        attrs[f"LUT_{t}_START_LOW"] = w32(start)
        attrs[f"LUT_{t}_END_LOW"] = w32(start + r.choice([0.5, 1.0, 4.0]) * max(mid, 1.0))
        attrs[f"LUT_{t}_INDEX_SELECT"] = sel & 0xFF
        for f in ("UFLOW", "OFLOW"):
            attrs[f"LUT_{t}_SLOPE_{f}_SCALE"] = h16(r.gauss(0.0, 0.05))
    attrs["LUT_LE_INDEX_OFFSET"] = r.randint(-12, 8) & 0xFF


def make_case(r: random.Random, index: int) -> tuple[str, dict, list, list, list]:
    """Draw case ``index``: ``(note, attrs, X words, LE words, LO words)``."""
    kind = KINDS[index % len(KINDS)]
    attrs = {name: r.getrandbits(w) for name, w in WIDTHS.items()}
    attrs.update(INPUT_DATA_TYPE=2, NORMALZ_LEN=(index // len(KINDS)) % 4, SQSUM_BYPASS=0,
                 MUL_BYPASS=0, LUT_LE_FUNCTION=0)  # fmt: skip
    n = 4 * r.choice([1, 2, 4, 6]) + 8
    x = _data(r, n, kind)
    le, lo = _realistic(r, attrs, linear_le=kind == "le_linear" or r.random() < 0.3)
    if kind == "le_linear":
        attrs["LUT_LE_FUNCTION"] = 1
    elif kind == "flows":
        _flows(r, attrs, x)
        attrs["LUT_LE_FUNCTION"] = r.getrandbits(1)
    elif kind == "bypass":
        attrs["SQSUM_BYPASS"], attrs["MUL_BYPASS"] = r.choice([(1, 0), (0, 1), (1, 1)])
        attrs["LUT_LE_FUNCTION"] = r.getrandbits(1)
    elif kind == "random":
        le = [r.getrandbits(16) for _ in range(65)]
        lo = [r.getrandbits(16) for _ in range(257)]
        for f in FIELDS[10:]:
            attrs[f] = r.getrandbits(WIDTHS[f])
        if r.random() < 0.5:
            for t in ("LE_START", "LE_END", "LO_START", "LO_END"):
                attrs[f"LUT_{t}_LOW"] = w32(r.gauss(0.0, 50.0))
    if kind == "flows" or r.random() < 0.3:
        p = index // len(KINDS) % 8  # every priority combination in turn
        attrs.update(LUT_UFLOW_PRIORITY=p & 1, LUT_OFLOW_PRIORITY=p >> 1 & 1,
                     LUT_HYBRID_PRIORITY=p >> 2 & 1)  # fmt: skip
    note = f"{kind}; NORMALZ_LEN {attrs['NORMALZ_LEN']}; LE " + (
        "linear" if attrs["LUT_LE_FUNCTION"] else "exponent")  # fmt: skip
    return note, attrs, x, le, lo


def _tensor(dtype: str, data: list, bits: bool = False) -> dict:
    t = {"dtype": dtype, "shape": [len(data)], "data": data}
    if bits:
        t["bits"] = True
    return t


def generate(seed: int, n_cases: int, exe: Path) -> list[dict]:
    """Draw ``n_cases`` cases for ``seed`` and run each through the cmod; the JSON records."""
    r = random.Random(seed)
    records = []
    for index in range(n_cases):
        note, attrs, x, le, lo = make_case(r, index)
        got = run_case(exe, attrs, x, le, lo)
        expected = {"Y": _tensor("int16", got.pop("Y")), "OUT_SATURATION": got["OUT_SATURATION"]}
        expected.update({k: got[k] for k in ("PERF_LUT_UFLOW", "PERF_LUT_OFLOW",
                                             "PERF_LUT_HYBRID", "PERF_LUT_LE_HIT",
                                             "PERF_LUT_LO_HIT")})  # fmt: skip
        records.append({
            "id": f"nvdla/cdp_fp16/s{seed}-{index:05d}", "backend": "nvdla", "op": "cdp",
            "attrs": {f: attrs[f] for f in FIELDS},
            "inputs": {"X": _tensor("float16", x, True), "LUT_LE": _tensor("float16", le, True),
                       "LUT_LO": _tensor("float16", lo, True)},
            "expected": expected, "source": SOURCE, "note": note,
        })  # fmt: skip
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/cdp.jsonl.gz")
    parser.add_argument("--cases", type=int, default=80, help="number of cases (default 80)")
    parser.add_argument("--hw", type=Path, help="nvdla/hw checkout or mirror")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nvdla_cdp_fp16_") as tmp:
        try:
            exe = build(args.hw, Path(tmp))
        except (CmodUnavailable, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        records = generate(args.seed, args.cases, exe)
    out = args.out / "cdp.jsonl.gz"
    write_jsonl_gz(records, out)
    print(f"wrote {len(records)} cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
