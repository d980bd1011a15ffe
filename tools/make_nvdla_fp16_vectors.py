"""Generate NVDLA SDP FP16 conformance vectors from NVIDIA's own C model (cmod), for any seed.

    python tools/make_nvdla_fp16_vectors.py --seed 2 --out /tmp/s2 [--cases 150] [--hw PATH]
    python tools/make_nvdla_fp16_vectors.py --verify FILE   # e.g. the shared sdp_fp16.jsonl.gz

What it is: a generator of ``sdp_fp16.jsonl.gz`` files in exactly the format of
``shared/conformance/nvdla-fp16/`` (read its README.md and ``shared/conformance/FORMAT.md``): op
``sdp`` of backend ``nvdla``, the 68 raw SDP register fields as attrs (the 67 of the INT page
``nvdla.md`` plus ``NAN_TO_ZERO``; every field present, unused ones random), ``X`` as float16 bits
(read from memory), float32 (from CACC) or int32 (integer processing), optional per-element
operands and the two LUT tables as float16 bits (int16 operands for integer processing), and the
expected int16 output words and counters as the cmod computes them. Case ids are
``nvdla/sdp_fp16/s{seed}-{index:05d}``; each ``note`` names the kind of case. The output is
deterministic for a seed (Python's ``random.Random(seed)``, gzip with mtime 0).

Kinds of case, in the README's proportions (150 cases: 19 passthrough, 13 BS/BN ALU, 12 BS/BN
MUL/PReLU/ReLU, 16 BS->BN chains, 15 EW MUL+ALU, 13 EW compare mode (all-, mostly- or not equal),
21 LUT (LE linear/exponent + LO linear, realistic sigmoid/tanh/exp_neg/recip/linear tables or
random ones, realistic or random registers), 15 FP16->INT16 output, 16 full random pipelines with
or without the LUT, 10 INT8/INT16 processing with FP16 output), with the README's edge cases made
frequent: fp16 subnormals, +-0, +-65504, +-Inf, NaNs with payloads; fp32 inputs at exact fp16 ties
+-1 ulp, around 65504/65520, below the fp16 subnormal range, fp32 subnormals, +-Inf;
``NAN_TO_ZERO = 1`` sometimes; multiplier overflow; negative PReLU slopes; LUT hits,
under/overflow and hybrid cases under all eight priority combinations.

How the expected values are computed: :func:`build` extracts, with ``git show COMMIT:path``, the
cmod files of https://github.com/nvdla/hw branch ``nvdlav1`` at commit :data:`COMMIT` from a bare
mirror or a checkout (``--hw``, else ``$QUANTEMU_NVDLA_HW``, else ``/work/.mirror/nvdla+hw/repo``):
:data:`CMOD_SOURCES` (the SDP HLS cores ``cmod/hls/sdp/sdp_{x,y,y_core,y_cvt,y_idx,y_inp,c}.cpp``
and ``cmod/hls_wrapper/sdp_hls_wrapper.cpp``, compiled unchanged) and :data:`CMOD_HEADERS`;
applies the one syntax patch ``nvdla_cmod_fp.AC_FIXED_PATCH`` to ``ac_fixed.h`` (``.slc<`` ->
``.template slc<``, which modern g++ needs; no arithmetic changes); writes three include files cut
verbatim from the commit (the ``Register field variables`` blocks of
``cmod/sdp/gen/sdp_reg_model.h`` and ``sdp_rdma_reg_model.h``, and lines 646-720 of
``cmod/sdp/NV_NVDLA_sdp.cpp``, the body of ``NV_NVDLA_sdp::SdpConfigHls()``) and a stub
``log.h`` (``nvdla_cmod_src.STUB_LOG_H``: the cmod's log.h needs SystemC; the stub's debug
macros expand to nothing, no arithmetic); and compiles ``tools/nvdla_sdp_fp16_harness.cpp``
with them (``nvdla_cmod_src.CXXFLAGS``: ``g++ -std=c++98 -O1``). The harness (see its header)
reads one case as text, runs the cmod's configuration, input handling, ``sdp_hls_wrapper::sdp()``
and compare-mode rule, and prints the output words and counters; it has no arithmetic of its
own. Each case runs in a fresh process.

``--verify FILE`` instead reruns the harness on every case of an existing vector file and checks
that it reproduces the expected outputs exactly (exit 1 on any difference).

Needs: g++ (C++98), git, the nvdla/hw sources at :data:`COMMIT`, NumPy. Nothing of quantemu.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/ is not a package
from nvdla_cmod_fp import COMMIT, ENV_HW, CmodUnavailable
from nvdla_cmod_src import (
    ARNVDLA,
    HLS_HEADERS,
    compile_harness,
    require_cxx,
    show_text,
    sources,
    write_jsonl_gz,
    write_sources,
    write_stubs,
)
from nvdla_fp16_cases import (
    COUNTERS,
    FIELDS,
    OPERANDS,
    Case,
    Gen,
    f32,
    f32_value,
)
from nvdla_fp16_kinds import make_case, schedule

HARNESS_CPP = Path(__file__).resolve().with_name("nvdla_sdp_fp16_harness.cpp")
TOOL = "tools/make_nvdla_fp16_vectors.py"
CMOD_SOURCES = (
    "cmod/hls/sdp/sdp_x.cpp",
    "cmod/hls/sdp/sdp_y.cpp",
    "cmod/hls/sdp/sdp_y_core.cpp",
    "cmod/hls/sdp/sdp_y_cvt.cpp",
    "cmod/hls/sdp/sdp_y_idx.cpp",
    "cmod/hls/sdp/sdp_y_inp.cpp",
    "cmod/hls/sdp/sdp_c.cpp",
    "cmod/hls_wrapper/sdp_hls_wrapper.cpp",
)
CMOD_HEADERS = (*HLS_HEADERS, "cmod/hls/sdp/sdp.h", "cmod/hls_wrapper/sdp_hls_wrapper.h", *ARNVDLA)
# (source, first line, last line, line before, line after): the body of SdpConfigHls(), 1-based.
CONFIG_BODY = (
    "cmod/sdp/NV_NVDLA_sdp.cpp",
    646,
    720,
    "void NV_NVDLA_sdp::SdpConfigHls() {",
    "}",
)
# include file -> header whose "Register field variables" block it holds
REG_FIELD_BLOCKS = {
    "sdp_reg_fields.inc": "cmod/sdp/gen/sdp_reg_model.h",
    "sdp_rdma_reg_fields.inc": "cmod/sdp/gen/sdp_rdma_reg_model.h",
}
HARNESS_NAME = "nvdla_sdp_fp16_harness"
SOURCE = (
    f"NVDLA cmod (nvdla/hw nvdlav1 {COMMIT}), x86 build: "
    "cmod/hls/sdp/sdp_{x,y,y_core,y_cvt,y_idx,y_inp,c}.cpp, cmod/hls/include/nvdla_float.h + "
    "nvdla_int.h, cmod/hls_wrapper/sdp_hls_wrapper.cpp, SdpConfigHls/SdpDataOperationDC glue of "
    f"cmod/sdp/NV_NVDLA_sdp.cpp; driven by {TOOL} + tools/nvdla_sdp_fp16_harness.cpp"
)


# --- extracting and building the harness ---------------------------------------------------------


def _reg_field_block(text: str, path: str) -> str:
    """The ``// Register field variables`` block of a cmod register-model header, verbatim."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == "// Register field variables"]
    if len(starts) != 1:
        raise CmodUnavailable(f"{path}: expected one 'Register field variables' block")
    end = starts[0] + 1
    while end < len(lines) and lines[end].strip():
        end += 1
    return "\n".join(lines[starts[0] : end]) + "\n"


def _config_body(text: str) -> str:
    """Lines 646-720 of NV_NVDLA_sdp.cpp (the body of SdpConfigHls()), checked, verbatim."""
    path, first, last, before, after = CONFIG_BODY
    lines = text.split("\n")
    if lines[first - 2].strip() != before or lines[last].strip() != after:
        raise CmodUnavailable(f"{path}: SdpConfigHls() is not at lines {first}-{last}")
    return "\n".join(lines[first - 1 : last]) + "\n"


def extract(hw: Path | None, dest: Path) -> Path:
    """Write the cmod files, the generated include files and the stub into ``dest``."""
    git = sources(hw)
    write_sources(git, CMOD_SOURCES + CMOD_HEADERS, dest)
    for name, path in REG_FIELD_BLOCKS.items():
        (dest / name).write_text(_reg_field_block(show_text(git, path), path), encoding="latin-1")
    (dest / "sdp_config_hls_body.inc").write_text(
        _config_body(show_text(git, CONFIG_BODY[0])), encoding="latin-1"
    )
    write_stubs(dest, systemc=False)
    return dest


def build(hw: Path | None = None, out_dir: Path | None = None) -> Path:
    """Extract the cmod at :data:`COMMIT` and compile the harness; return the executable's path."""
    require_cxx()
    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="nvdla_sdp_fp16_"))
    src = extract(hw, out_dir / "src")
    return compile_harness(HARNESS_CPP, src, CMOD_SOURCES, out_dir / HARNESS_NAME)


# --- running one case ----------------------------------------------------------------------------


def harness_input(attrs: dict, x_dtype: str, x_words: list, arrays: dict) -> str:
    """The harness's text input: register fields, FLYING_MODE, X words and the other arrays."""
    lines = [f"{name} {attrs[name]}" for name, _ in FIELDS]
    lines.append(f"FLYING_MODE {0 if x_dtype == 'float16' else 1}")  # fp16 words from memory
    for name, words in (("X", x_words), *arrays.items()):
        lines.append(f"{name} {len(words)} " + " ".join(str(int(w)) for w in words))
    return "\n".join(lines) + "\n"


def run_harness(exe: Path, text: str) -> dict:
    """Run the harness on one case; return {"Y": [int16...], counter: int, ...}."""
    result = subprocess.run(
        [str(exe)], input=text, capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"harness failed ({result.returncode}): {result.stderr.strip()}")
    out: dict = {}
    for line in result.stdout.splitlines():
        key, *values = line.split()
        out[key] = [int(v) for v in values] if key == "Y" else int(values[0])
    missing = {"Y", *COUNTERS} - out.keys()
    if missing:
        raise RuntimeError(f"harness output lacks {sorted(missing)}")
    return out


# --- number formats (bit patterns; NumPy does the IEEE conversions) ------------------------------


def _tensor(dtype: str, data: list, bits: bool = False) -> dict:
    t = {"dtype": dtype, "shape": [len(data)], "data": data}
    if bits:
        t["bits"] = True
    return t


def _float32_json(w: int):
    v = f32_value(w)
    if math.isnan(v):
        raise ValueError("a float32 X word is NaN; JSON cannot carry its payload")
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _signed16(w: int) -> int:
    return w - 65536 if w >= 32768 else w


def case_record(c: Case, case_id: str, expected: dict) -> dict:
    """The JSON object of a case, in the shared file's layout."""
    if c.x_dtype == "float16":
        x = _tensor("float16", c.x, bits=True)
    elif c.x_dtype == "float32":
        x = _tensor("float32", [_float32_json(w) for w in c.x])
    else:
        x = _tensor("int32", c.x)
    inputs = {"X": x}
    for name in OPERANDS:
        if name in c.ops:
            words = c.ops[name]
            inputs[name] = (
                _tensor("float16", words, bits=True)
                if c.fp16_proc
                else _tensor("int16", [_signed16(w & 0xFFFF) for w in words])
            )
    if c.lut is not None:
        inputs["LUT_LE"] = _tensor("float16", c.lut[0], bits=True)
        inputs["LUT_LO"] = _tensor("float16", c.lut[1], bits=True)
    exp = {"Y": _tensor("int16", expected["Y"])}
    exp.update({k: expected[k] for k in COUNTERS})
    return {
        "id": case_id,
        "backend": "nvdla",
        "op": "sdp",
        "attrs": {name: c.attrs[name] for name, _ in FIELDS},
        "inputs": inputs,
        "expected": exp,
        "source": SOURCE,
        "note": "; ".join(c.tags),
    }


def lut_active(attrs: dict) -> bool:
    return attrs["EW_BYPASS"] == 0 and attrs["EW_LUT_BYPASS"] == 0


def generate(seed: int, n_cases: int, exe: Path) -> list[dict]:
    """Draw ``n_cases`` cases for ``seed``, run each through the harness; return the records."""
    g = Gen(seed)
    records = []
    for index, kind in enumerate(schedule(n_cases, g)):
        c = make_case(g, kind)
        if not lut_active(c.attrs):
            c.lut = None
        elif c.lut is None:
            raise AssertionError(f"case {index}: LUT active without tables")
        arrays = {name: c.ops[name] for name in OPERANDS if name in c.ops}
        if c.lut is not None:
            arrays["LUT_LE"], arrays["LUT_LO"] = c.lut
        expected = run_harness(exe, harness_input(c.attrs, c.x_dtype, c.x, arrays))
        records.append(case_record(c, f"nvdla/sdp_fp16/s{seed}-{index:05d}", expected))
    return records


# --- verifying the harness against an existing vector file ---------------------------------------


def _words(t: dict) -> list[int]:
    """A JSON tensor's elements as the harness's integer words."""
    if t["dtype"] == "float32":
        return [f32(float(v)) for v in t["data"]]
    return [int(v) for v in t["data"]]


def verify(exe: Path, path: Path) -> int:
    """Rerun the harness on every case of ``path``; print differences; return their number."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        cases = [json.loads(line) for line in fh if line.strip()]
    bad = 0
    for c in cases:
        x = c["inputs"]["X"]
        arrays = {k: _words(t) for k, t in c["inputs"].items() if k != "X"}
        got = run_harness(exe, harness_input(c["attrs"], x["dtype"], _words(x), arrays))
        want = {k: (v["data"] if isinstance(v, dict) else v) for k, v in c["expected"].items()}
        diffs = [k for k in want if want[k] != got[k]]
        if diffs:
            bad += 1
            print(f"MISMATCH {c['id']} ({c.get('note', '')}): {', '.join(diffs)}")
            for k in diffs:
                if k == "Y":
                    idx = [
                        i for i, (a, b) in enumerate(zip(want[k], got[k], strict=True)) if a != b
                    ]
                    print(f"  Y: {len(idx)} words differ, first at {idx[0]}: "
                          f"expected {want[k][idx[0]]}, harness {got[k][idx[0]]}")  # fmt: skip
                else:
                    print(f"  {k}: expected {want[k]}, harness {got[k]}")
    print(f"{len(cases) - bad} of {len(cases)} cases reproduced exactly")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--out", type=Path, help="output folder: writes OUT/sdp_fp16.jsonl.gz")
    parser.add_argument("--cases", type=int, default=150, help="number of cases (default 150)")
    parser.add_argument("--hw", type=Path, help=f"nvdla/hw checkout or mirror (default ${ENV_HW})")
    parser.add_argument("--build-dir", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument("--verify", type=Path, help="check the harness against a vector file")
    args = parser.parse_args(argv)
    if args.out is None and args.verify is None:
        parser.error("give --out DIR (generate) or --verify FILE")
    with tempfile.TemporaryDirectory(prefix="nvdla_sdp_fp16_") as tmp:
        try:
            exe = build(args.hw, args.build_dir or Path(tmp))
        except (CmodUnavailable, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.verify is not None:
            return 1 if verify(exe, args.verify) else 0
        records = generate(args.seed, args.cases, exe)
        out = args.out / "sdp_fp16.jsonl.gz"
        write_jsonl_gz(records, out)
        print(f"wrote {len(records)} cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
