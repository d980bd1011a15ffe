"""The plumbing the NVDLA FP16 vector generators share: cmod sources out of nvdla/hw, harnesses in.

Every generator (``make_nvdla_{fp16,pdp_fp16,cdp_fp16,conv_fp16}_vectors.py``) does the same
steps around its own harness:

- read cmod files at :data:`~nvdla_cmod_fp.COMMIT` from a checkout or bare mirror of nvdla/hw
  (:func:`sources`, :func:`show_text`; the cmod's files are Latin-1);
- write them flat into a build folder, ``ac_fixed.h`` with the one syntax patch
  (:func:`write_sources`);
- cut a range of lines out of a cmod file, checking the first line so that a moved function fails
  loudly rather than compiling the wrong code (:func:`cut_lines`);
- stand-ins for ``log.h`` and ``systemc.h``, which the HLS files include but whose SystemC they
  do not use (:func:`write_stubs`; no arithmetic);
- compile the harness with g++ (:func:`compile_harness`);
- write the vectors reproducibly (:func:`write_jsonl_gz`: gzip with mtime 0).

Nothing here computes: the expected values come from the cmod code the harness runs.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from nvdla_cmod_fp import (
    CXX,
    HLS_HEADERS,
    CmodUnavailable,
    _git,
    _show,
    default_hw,
    patch_ac_fixed,
)

__all__ = ["ARNVDLA", "CXXFLAGS", "HLS_HEADERS", "compile_harness", "cut_lines", "require_cxx"]
__all__ += ["show_text", "sources", "write_jsonl_gz", "write_sources", "write_stubs"]

#: the register-name headers the harnesses include
ARNVDLA = ("cmod/include/arnvdla.h", "cmod/include/arnvdla.uh")
CXXFLAGS = ("-std=c++98", "-O1", "-w")
STUB_LOG_H = """\
// Stub for cmod/include/log.h, which needs SystemC. The cmod's debug and info messages expand to
// nothing; cslAssert is assert. The C headers below are the ones systemc.h used to provide to the
// files that include log.h (uint*_t, pow, assert). No arithmetic.
#ifndef __LOG_H__
#define __LOG_H__
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cstdlib>
#include <iostream>
#define cslDebug(args) do { } while (0)
#define cslInfo(args) do { } while (0)
#define FAIL(args) do { } while (0)
#define cslAssert(expr) assert(expr)
#endif
"""
STUB_SYSTEMC_H = "// Empty stand-in: the HLS files include <systemc.h> but use none of it.\n"


def sources(hw: Path | None) -> list[str]:
    """The git command prefix that reads nvdla/hw at ``hw`` (default: :func:`default_hw`)."""
    return _git(Path(hw) if hw is not None else default_hw())


def show_text(git: list[str], path: str) -> str:
    """A cmod file at the pinned commit as text (Latin-1, as the cmod's files are)."""
    return _show(git, path).decode("latin-1")


def write_sources(git: list[str], paths: Iterable[str], dest: Path) -> None:
    """Write ``paths`` flat into ``dest``; ``ac_fixed.h`` gets its one syntax patch."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in paths:
        text = patch_ac_fixed(path, show_text(git, path))
        (dest / Path(path).name).write_text(text, encoding="latin-1")


def cut_lines(text: str, path: str, first: int, last: int, expected: str) -> str:
    """Lines ``first..last`` (1-based, inclusive) of ``text``, verbatim; the first must start
    with ``expected`` (else :class:`CmodUnavailable`: the sources are not the ones pinned)."""
    lines = text.split("\n")
    if not lines[first - 1].startswith(expected):
        raise CmodUnavailable(f"{path}: line {first} is not '{expected}...'")
    return "\n".join(lines[first - 1 : last]) + "\n"


def write_stubs(dest: Path, *, systemc: bool) -> Path:
    """``dest/stub/log.h`` (and ``systemc.h`` with ``systemc``); the folder to put first on the
    include path."""
    stub = dest / "stub"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "log.h").write_text(STUB_LOG_H)
    if systemc:
        (stub / "systemc.h").write_text(STUB_SYSTEMC_H)
    return stub


def require_cxx() -> None:
    """:class:`CmodUnavailable` when g++ is missing."""
    if shutil.which(CXX) is None:
        raise CmodUnavailable(f"{CXX} is not installed; it is needed to compile the NVDLA cmod")


def compile_harness(
    cpp: Path, src: Path, files: Sequence[str], exe: Path, *, flags=CXXFLAGS, include=(), link=()
) -> Path:
    """``g++ FLAGS -Isrc/stub -Isrc -I<include...> cpp src/<files...> -o exe LINK``; ``exe``, or
    RuntimeError with g++'s message. The stubs come first on the include path."""
    cmd = [CXX, *flags, f"-I{src / 'stub'}", f"-I{src}", *(f"-I{d}" for d in include), str(cpp)]
    cmd += [str(src / Path(p).name) for p in files] + ["-o", str(exe), *link]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return exe


def write_jsonl_gz(records: list[dict], path: Path) -> None:
    """One JSON object per line, compact, gzip with mtime 0 (byte-identical for a seed)."""
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
