"""Run the oneDNN ``matmul`` and ``conv2d`` conformance vectors against oneDNN 3.2.0: drift report.

    python tools/onednn32_drift.py --vectors /work/shared/conformance/onednn --out drift.md

The vectors (``matmul.jsonl``, ``conv2d.jsonl``; format ``conformance/FORMAT.md``, semantics
``conformance/onednn.md``) hold what **oneDNN 3.12.0** computed. This script recomputes every case
with **oneDNN 3.2.0** (``onednn-cpu-gomp==2023.2.0``, headers from
``onednn-devel-cpu-gomp==2023.2.0``; both must already be installed in this Python environment,
nothing is installed) and compares the outputs bit for bit with ``expected``.

It compiles ``tools/onednn32_drift.c`` with the system C compiler (``cc``) against the library in
``<prefix>/lib`` and the headers in ``<prefix>/include`` (``<prefix>`` is this interpreter's data
prefix, e.g. the virtualenv) and runs it once per case with ``ONEDNN_MAX_CPU_ISA`` set to the
case's ``isa`` in upper case and ``ONEDNN_VERBOSE=1``. What the C program does mirrors the
``source`` of each case:

- ``matmul``, ``api = "matmul"``: the matmul primitive, ``A (M,K)`` u8/s8 plain, ``B (K,N)`` s8
  reordered into the primitive's preferred layout, f32 dst (every accumulator is below 2^24, so it
  is exact), the source zero point as a runtime attribute when it is non-zero. Cases made through
  PyTorch's ``qlinear_pointwise`` also get unit weight scales (mask 2 when ``N > 1``, else 0), as
  PyTorch sets them; the C-API cases get no scales (``--c-api-weight-scales`` adds them too).
- ``matmul``, ``api = "gemm"``: ``dnnl_gemm_s8s8s32('N', 'N', 'F', M, N, K, 1, A, K, 0, B, N, 0,
  0, C, N, {0})``, the call ``torch._int_mm`` makes for contiguous tensors.
- ``conv2d``: ``convolution_forward`` (direct, forward inference), ``nhwc`` src and dst, weights
  ``oihw``/``goihw`` reordered into the preferred layout, no bias, f32 dst, strides, pads,
  dilations (PyTorch's 1 = dense becomes oneDNN's 0) and groups from the attributes, the source
  zero point as a runtime attribute when it is non-zero.

A case whose ISA this CPU lacks (``/proc/cpuinfo`` flags; e.g. ``avx2_vnni`` needs ``avx_vnni``)
is not run: ``ONEDNN_MAX_CPU_ISA`` only caps the ISA, so oneDNN would silently run a lower one.
Such cases are listed with the reason.

The markdown report (``--out``, else standard output) has, per op and ISA, the number of cases
that agree and differ; for each differing case its id, the number of differing values, the first
one, and the implementation oneDNN 3.2 picked (its verbose ``exec`` line) next to the one 3.12
picked (the ``impl=`` at the end of the case's ``note``), and which ``conv2d`` kernel families
of the page (§5.2) reproduce 3.2's output when ``quantemu.backends.onednn.conv2d`` evaluates them;
the implementation pairs seen; and the cases that could not be run and why. The exit status is 0
when the report was written (whatever drift it shows), 1 on a setup error.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROGRAM_C = ROOT / "tools" / "onednn32_drift.c"
OPS = ("matmul", "conv2d")
ISA_ORDER = ("avx2", "avx512_core", "avx2_vnni", "avx512_core_vnni")
AVX512_CORE = frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl"})
ISA_FLAGS = {  # /proc/cpuinfo flags each ONEDNN_MAX_CPU_ISA value needs
    "avx2": frozenset({"avx2", "fma"}),
    "avx512_core": AVX512_CORE,
    "avx2_vnni": frozenset({"avx2", "fma", "avx_vnni"}),
    "avx512_core_vnni": AVX512_CORE | {"avx512_vnni"},
}
TIMEOUT_S = 120


@dataclass
class Outcome:
    """One case: ``status`` is ``agree``, ``differ`` or ``not run``."""

    case: dict
    status: str
    impl32: str = ""
    differing: int = 0
    total: int = 0
    first: str = ""
    reason: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def impl312(self) -> str:
        match = re.search(r"impl=(\S+)\s*$", self.case.get("note", ""))
        return match.group(1) if match else "?"


def _library() -> tuple[Path, Path]:
    """oneDNN 3.2.0's library folder and include folder in this environment."""
    prefix = Path(sysconfig.get_paths()["data"])
    lib, include = prefix / "lib", prefix / "include"
    if not (lib / "libdnnl.so.3").exists():
        raise SystemExit(f"{lib / 'libdnnl.so.3'} is missing (onednn-cpu-gomp==2023.2.0)")
    if not (include / "oneapi" / "dnnl" / "dnnl.h").exists():
        raise SystemExit(f"{include}/oneapi/dnnl/dnnl.h is missing (onednn-devel-cpu-gomp)")
    return lib, include


def _build(folder: Path) -> tuple[Path, Path]:
    lib, include = _library()
    binary = folder / "onednn32_drift"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("a C compiler (cc) is needed to build tools/onednn32_drift.c")
    subprocess.run(
        [compiler, "-O1", f"-I{include}", str(PROGRAM_C), f"-L{lib}", "-ldnnl",
         f"-Wl,-rpath,{lib}", "-o", str(binary)],
        check=True,
    )  # fmt: skip
    return binary, lib


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _load(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    cases = []
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                case = json.loads(line)
                case["_line"] = number
                cases.append(case)
    return cases


def _array(tensor: dict) -> np.ndarray:
    return np.array(tensor["data"], dtype=np.dtype(tensor["dtype"])).reshape(tensor["shape"])


def _argv(case: dict, folder: Path, c_api_scales: bool) -> tuple[list[str], tuple, str]:
    """Write the case's inputs to ``folder``; the C program's arguments, the output shape
    (in the order the program writes it) and dtype."""
    attrs, inputs = case["attrs"], case["inputs"]
    zp = int(attrs.get("src_zero_point", 0))
    if case["op"] == "matmul":
        a, b = _array(inputs["A"]), _array(inputs["B"])
        (m, k), n = a.shape, b.shape[1]
        np.ascontiguousarray(a).tofile(folder / "src.bin")
        np.ascontiguousarray(b).tofile(folder / "wei.bin")
        dims = [str(m), str(k), str(n)]
        if attrs["api"] == "gemm":
            if attrs["src_dt"] != "s8" or zp != 0:
                raise ValueError("gemm_s8s8s32 cases are s8 with zero point 0")
            return ["gemm", str(folder), *dims], (m, n), "int32"
        via_torch = "PyTorch" in case.get("source", "")
        mask = (2 if n > 1 else 0) if via_torch or c_api_scales else -1
        return (
            ["matmul", str(folder), *dims, attrs["src_dt"], str(zp), str(mask)],
            (m, n),
            "float32",
        )
    x, w = _array(inputs["x"]), _array(inputs["w"])
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    g = int(attrs["groups"])
    sh, sw = attrs["strides"]
    top, left, bottom, right = attrs["pads"]
    dh, dw = attrs["dilations"]
    oh = (h + top + bottom - ((kh - 1) * dh + 1)) // sh + 1
    ow = (wd + left + right - ((kw - 1) * dw + 1)) // sw + 1
    np.ascontiguousarray(x.transpose(0, 2, 3, 1)).tofile(folder / "src.bin")
    np.ascontiguousarray(w).tofile(folder / "wei.bin")  # oihw == goihw flattened
    numbers = [n, c, h, wd, o, kh, kw, g, sh, sw, top, left, bottom, right, dh, dw]
    return (
        ["conv", str(folder), *map(str, numbers), attrs["src_dt"], str(zp)],
        (n, oh, ow, o),
        "float32",
    )


def _verbose_impl(stdout: str) -> str:
    """The implementation of the compute call from ONEDNN_VERBOSE's ``exec`` lines."""
    for line in stdout.splitlines():
        parts = line.split(",")
        if len(parts) > 4 and parts[0] == "onednn_verbose" and parts[1] == "exec":
            if parts[3] in ("matmul", "convolution"):
                return parts[4]
            if parts[3] == "gemm_api":
                return "gemm_api"
    for line in stdout.splitlines():
        if line.startswith("impl "):
            return line.split(" ", 1)[1].strip()
    return "?"


def _isa_line(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("onednn_verbose,info,cpu,isa:"):
            return line.split("isa:", 1)[1].strip()
    return ""


def _run_case(binary: Path, case: dict, folder: Path, c_api_scales: bool) -> Outcome:
    isa = case["attrs"]["isa"]
    argv, shape, dtype = _argv(case, folder, c_api_scales)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEDNN_", "DNNL_"))}
    env["ONEDNN_MAX_CPU_ISA"] = isa.upper()
    env["ONEDNN_VERBOSE"] = "1"
    done = subprocess.run(
        [str(binary), *argv],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
    )
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        last = message[-1] if message else f"exit status {done.returncode}"
        return Outcome(case, "not run", reason=f"oneDNN 3.2 failed: {last}")
    impl = _verbose_impl(done.stdout)
    raw = np.fromfile(folder / "dst.bin", dtype=dtype)
    out = raw.reshape(shape)
    name = "C" if case["op"] == "matmul" else "y"
    expected = _array(case["expected"][name]).astype(np.int64)
    if case["op"] == "conv2d":
        out = out.transpose(0, 3, 1, 2)  # nhwc -> nchw
    values = out.astype(np.float64)
    if dtype == "float32" and not np.all(np.isfinite(values) & (values == np.round(values))):
        got = values  # a non-integral f32 output can only differ
    else:
        got = values.astype(np.int64)
    if got.shape != expected.shape:
        return Outcome(case, "differ", impl, expected.size, expected.size,
                       f"shape {list(got.shape)} vs {list(expected.shape)}")  # fmt: skip
    diff = got != expected
    outcome = Outcome(case, "differ" if diff.any() else "agree", impl, int(diff.sum()), diff.size)
    outcome.extra["isa_line"] = _isa_line(done.stdout)
    outcome.extra["got"] = got
    if diff.any():
        index = np.unravel_index(int(np.flatnonzero(diff)[0]), diff.shape)
        outcome.first = (
            f"{name}{list(map(int, index))}: 3.12 {int(expected[index])}, 3.2 {got[index]:g}"
        )
    return outcome


def _matching_families(outcome: Outcome) -> str:
    """The ``conv2d`` families (page §5.2) whose emulation gives oneDNN 3.2's output."""
    case, got = outcome.case, outcome.extra.get("got")
    if case["op"] != "conv2d" or got is None:
        return "—"
    try:  # imported here so that the drift check itself never depends on the emulator
        conv2d = importlib.import_module("quantemu.backends.onednn").conv2d
        params_module = importlib.import_module("quantemu.backends.onednn.params")
        error = importlib.import_module("quantemu.errors").QuantemuError
    except Exception as problem:  # any import-time failure of the package
        return f"? (quantemu: {type(problem).__name__})"
    attrs = dict(case["attrs"])
    geometry = params_module.ConvGeometry(
        *(attrs.pop(k) for k in ("strides", "pads", "dilations", "groups"))
    )
    x, w = _array(case["inputs"]["x"]), _array(case["inputs"]["w"])
    matching = []
    for family in params_module.ConvImpl:
        try:
            params = params_module.Conv2dParams(
                **{**attrs, "impl": family.value, "geometry": geometry}
            )
            y = conv2d(x, w, params).acc
        except error:  # a family the model rejects for this shape
            continue
        if y.shape == got.shape and np.array_equal(y.astype(np.int64), got):
            matching.append(f"`{family.value}`")
    return ", ".join(matching) or "none"


def _skip_reason(isa: str, flags: set[str]) -> str | None:
    need = ISA_FLAGS.get(isa)
    if need is None:
        return f"unknown isa {isa!r}"
    missing = sorted(need - flags)
    if missing:
        return (
            f"this CPU lacks {', '.join(missing)}: ONEDNN_MAX_CPU_ISA={isa.upper()} would "
            "silently run a lower ISA"
        )
    return None


def _case_label(case: dict) -> str:
    a = case["attrs"]
    if case["op"] == "matmul":
        shape = f"{list(case['inputs']['A']['shape'])}x{list(case['inputs']['B']['shape'])}"
        return f"{a['api']} {a['src_dt']} zp={a['src_zero_point']} {shape}"
    return (
        f"{a['src_dt']} zp={a['src_zero_point']} x{case['inputs']['x']['shape']} "
        f"w{case['inputs']['w']['shape']} s{a['strides']} p{a['pads']} d{a['dilations']} "
        f"g{a['groups']} family={a.get('impl')}"
    )


def _report(outcomes: list[Outcome], context: dict) -> str:
    lines = ["# oneDNN 3.2.0 against the oneDNN 3.12.0 conformance vectors (matmul, conv2d)", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    lines += ["", "## Summary", "", "| op | isa | cases | agree | differ | not run |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.case["op"], o.case["attrs"]["isa"])].append(o)

    def order(key):
        op, isa = key
        rank = ISA_ORDER.index(isa) if isa in ISA_ORDER else len(ISA_ORDER)
        return (OPS.index(op) if op in OPS else len(OPS), rank, isa)

    totals = Counter()
    for key in sorted(groups, key=order):
        counts = Counter(o.status for o in groups[key])
        totals.update(counts)
        lines.append(
            f"| {key[0]} | {key[1]} | {len(groups[key])} | {counts['agree']} | "
            f"{counts['differ']} | {counts['not run']} |"
        )
    lines.append(
        f"| **all** | | {len(outcomes)} | {totals['agree']} | {totals['differ']} | "
        f"{totals['not run']} |"
    )
    differ = [o for o in outcomes if o.status == "differ"]
    lines += ["", "## Differing cases", ""]
    if differ:
        lines += [
            "| id | isa | case | differing values | first difference | 3.2 impl | 3.12 impl "
            "| §5 families that give 3.2's output |",
            "| --- | --- | --- | ---: | --- | --- | --- | --- |",
        ]
        for o in differ:
            lines.append(
                f"| {o.case['id']} | {o.case['attrs']['isa']} | {_case_label(o.case)} | "
                f"{o.differing} / {o.total} | {o.first} | `{o.impl32}` | `{o.impl312}` | "
                f"{_matching_families(o)} |"
            )
        lines += [
            "",
            "The last column evaluates the page's model (`quantemu.backends.onednn.conv2d`) with "
            "every `impl` family on the case and lists those that reproduce oneDNN 3.2's output.",
        ]
    else:
        lines.append("None.")
    lines += ["", "## Implementations (3.12 → 3.2) of the cases that ran", "",
              "| op | isa | 3.12 impl | 3.2 impl | agree | differ |",
              "| --- | --- | --- | --- | ---: | ---: |"]  # fmt: skip
    pairs: dict[tuple, Counter] = defaultdict(Counter)
    for o in outcomes:
        if o.status != "not run":
            pairs[(o.case["op"], o.case["attrs"]["isa"], o.impl312, o.impl32)][o.status] += 1
    for key in sorted(pairs, key=lambda k: (*order(k[:2]), k[2], k[3])):
        c = pairs[key]
        lines.append(
            f"| {key[0]} | {key[1]} | `{key[2]}` | `{key[3]}` | {c['agree']} | {c['differ']} |"
        )
    skipped = [o for o in outcomes if o.status == "not run"]
    lines += ["", "## Not run", ""]
    if skipped:
        by_reason: dict[str, list[str]] = defaultdict(list)
        for o in skipped:
            by_reason[o.reason].append(o.case["id"])
        lines += ["| reason | cases | ids |", "| --- | ---: | --- |"]
        for reason, ids in by_reason.items():
            lines.append(f"| {reason} | {len(ids)} | {', '.join(ids)} |")
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=Path, required=True, help="the onednn vector folder")
    parser.add_argument("--out", type=Path, help="markdown report (default: standard output)")
    parser.add_argument(
        "--c-api-weight-scales",
        action="store_true",
        help="give the C-API matmul cases unit weight scales too (default: no scale attribute)",
    )
    args = parser.parse_args(argv)
    files = []
    for op in OPS:
        found = [p for p in (args.vectors / f"{op}.jsonl", args.vectors / f"{op}.jsonl.gz")
                 if p.exists()]  # fmt: skip
        if not found:
            print(f"no {op}.jsonl[.gz] in {args.vectors}", file=sys.stderr)
            return 1
        files.append(found[0])
    flags = _cpu_flags()
    outcomes: list[Outcome] = []
    isa_lines: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        binary, lib = _build(folder)
        for path in files:
            for case in _load(path):
                isa = case.get("attrs", {}).get("isa", "?")
                reason = _skip_reason(isa, flags)
                if reason is not None:
                    outcomes.append(Outcome(case, "not run", reason=reason))
                    continue
                try:
                    outcome = _run_case(binary, case, folder, args.c_api_weight_scales)
                except (subprocess.TimeoutExpired, ValueError, KeyError) as error:
                    outcome = Outcome(case, "not run", reason=f"{type(error).__name__}: {error}")
                if outcome.extra.get("isa_line"):
                    isa_lines.setdefault(isa, outcome.extra["isa_line"])
                outcomes.append(outcome)
    command = "python tools/onednn32_drift.py --vectors " + str(args.vectors)
    if args.c_api_weight_scales:
        command += " --c-api-weight-scales"
    context = {
        "command": f"`{command}`",
        "library": f"`{lib / 'libdnnl.so.3'}` (oneDNN 3.2.0, onednn-cpu-gomp 2023.2.0)",
        "vectors": ", ".join(f"`{p}`" for p in files),
        "CPU": f"{_cpu_model()}, {os.cpu_count()} logical CPUs "
        f"(ISA flags: {' '.join(sorted(f for f in flags if 'avx' in f or f == 'fma'))})",
        "oneDNN 3.2 ISA per cap": "; ".join(f"{k.upper()} → {v}" for k, v in isa_lines.items()),
        "matmul weight scales": "PyTorch cases: unit, mask 2 (N > 1) or 0; C-API cases: "
        + ("unit, same masks" if args.c_api_weight_scales else "none"),
    }
    report = _report(outcomes, context)
    if args.out is None:
        sys.stdout.write(report)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report, encoding="utf-8")
        counts = Counter(o.status for o in outcomes)
        print(f"{args.out}: {dict(counts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
