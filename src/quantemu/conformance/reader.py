"""Reading conformance vector files (``FORMAT.md``) into cases.

Each non-blank line of a ``.jsonl`` or ``.jsonl.gz`` file is one case. A line that does not follow
the format becomes a :class:`MalformedCase` that carries ``file:line`` and the reason, and reading
goes on with the next line: one bad vector must not hide the verdict on the others. Only a broken
gzip stream ends a file early, because nothing after the break can be recovered.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from quantemu.conformance.tensors import CaseFormatError, decode_tensor, json_type
from quantemu.errors import QuantemuError

VECTOR_SUFFIXES = (".jsonl", ".jsonl.gz")

_REQUIRED = {"id": str, "backend": str, "op": str, "attrs": dict, "inputs": dict, "expected": dict}
_OPTIONAL = {"source": str, "note": str}


class SuiteError(QuantemuError):
    """A path given to the runner that holds no vectors to run (a usage error, exit code 2)."""


@dataclass(frozen=True)
class VectorFile:
    """One vector file: how reports name it, and where its bytes are."""

    display: str
    source: Traversable = field(compare=False)

    @property
    def compressed(self) -> bool:
        """True for ``.jsonl.gz`` files."""
        return self.source.name.endswith(".gz")


@dataclass(frozen=True)
class Case:
    """One well-formed case: the call to make and the outputs it must produce."""

    id: str
    backend: str
    op: str
    attrs: dict[str, Any]
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray | int]
    file: str
    line: int
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class MalformedCase:
    """A line that could not be read as a case; ``id``/``backend``/``op`` when they were legible."""

    file: str
    line: int
    reason: str
    id: str | None = None
    backend: str | None = None
    op: str | None = None


def is_vector_file(name: str) -> bool:
    """True for the file names a suite directory contributes (``*.jsonl``, ``*.jsonl.gz``)."""
    return name.endswith(VECTOR_SUFFIXES)


def collect_files(paths: Sequence[str | os.PathLike[str]]) -> list[VectorFile]:
    """The vector files named by ``paths``: files as given, directories searched recursively.

    Directory contents are sorted by relative path; other files (``.md``) are ignored. A file
    reached twice is read once. Raises :class:`SuiteError` for a path that does not exist, a
    directory without vector files, or a named file that is not ``.jsonl``/``.jsonl.gz``.
    """
    files: list[VectorFile] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = _walk(path)
            if not found:
                raise SuiteError(f"{str(raw)!r} contains no .jsonl or .jsonl.gz vector files")
            files.extend(found)
        elif path.is_file():
            if not is_vector_file(path.name):
                raise SuiteError(f"{str(raw)!r} is not a .jsonl or .jsonl.gz vector file")
            files.append(VectorFile(str(raw), path))
        else:
            raise SuiteError(f"{str(raw)!r} does not exist")
    unique: dict[str, VectorFile] = {}
    for vf in files:
        unique.setdefault(os.path.realpath(vf.source), vf)
    return list(unique.values())


def _walk(root: Path) -> list[VectorFile]:
    # os.walk does not follow symlinked directories, so a link cycle cannot recurse forever.
    found = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            if is_vector_file(name):
                path = Path(dirpath, name)
                found.append((path.relative_to(root).as_posix(), path))
    return [VectorFile(str(root / rel), path) for rel, path in sorted(found)]


def collect_tree(root: Traversable, display_prefix: str) -> list[VectorFile]:
    """Every vector file under a resource tree (the bundled suite), sorted by relative path."""
    found: list[tuple[str, Traversable]] = []

    def visit(node: Traversable, rel: str) -> None:
        for child in node.iterdir():
            child_rel = f"{rel}{child.name}"
            if child.is_dir():
                visit(child, child_rel + "/")
            elif is_vector_file(child.name):
                found.append((child_rel, child))

    visit(root, "")
    return [VectorFile(f"{display_prefix}{rel}", node) for rel, node in sorted(found)]


def read_cases(files: Iterable[VectorFile]) -> Iterator[Case | MalformedCase]:
    """Every case of every file in order; a case whose id was seen before is malformed.

    A line that is malformed for another reason keeps that reason, which says more.
    """
    first_seen: dict[str, str] = {}
    for vf in files:
        for item in read_file(vf):
            if item.id is not None:
                previous = first_seen.setdefault(item.id, f"{item.file}:{item.line}")
                if isinstance(item, Case) and previous != f"{item.file}:{item.line}":
                    yield MalformedCase(
                        item.file,
                        item.line,
                        f"duplicate id {item.id!r} (first used at {previous})",
                        item.id,
                        item.backend,
                        item.op,
                    )
                    continue
            yield item


def read_file(vf: VectorFile) -> Iterator[Case | MalformedCase]:
    """The cases of one file, in line order; blank lines are skipped."""
    lineno = 0
    try:
        with _open(vf) as stream:
            for lineno, raw in enumerate(stream, start=1):
                if raw.strip():
                    yield parse_line(raw, vf.display, lineno)
    except (OSError, EOFError, zlib.error) as exc:
        # gzip.BadGzipFile is an OSError; a truncated stream raises EOFError.
        kind = "gzip stream" if vf.compressed else "file"
        yield MalformedCase(
            vf.display,
            lineno + 1,
            f"cannot read {kind}: {exc}; the rest of the file is skipped",
        )


@contextlib.contextmanager
def _open(vf: VectorFile) -> Iterator[BinaryIO]:
    with vf.source.open("rb") as raw:
        if vf.compressed:
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield unzipped  # type: ignore[misc]
        else:
            yield raw


def parse_line(raw: bytes, file: str, line: int) -> Case | MalformedCase:
    """Parse one line into a :class:`Case`, or a :class:`MalformedCase` that says why not."""
    try:
        # Without its line break, so that a JSON error's column is a column of this line.
        text = raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as exc:
        return MalformedCase(file, line, f"invalid UTF-8 at byte {exc.start}: {exc.reason}")
    try:
        obj = json.loads(text, object_pairs_hook=_object, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return MalformedCase(file, line, f"invalid JSON: {exc.msg} (column {exc.colno})")
    except RecursionError:
        return MalformedCase(file, line, "invalid JSON: nested too deeply")
    except CaseFormatError as exc:
        return MalformedCase(file, line, f"invalid JSON: {exc}")
    try:
        return build_case(obj, file, line)
    except CaseFormatError as exc:
        # Keep whatever names the case still has, so the report can file it under its op.
        return MalformedCase(
            file, line, str(exc), _legible(obj, "id"), _legible(obj, "backend"), _legible(obj, "op")
        )


def _legible(obj: Any, key: str) -> str | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) and value else None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of duplicate keys silently; a vector that says two things about
    # the same name is ambiguous, so it is malformed.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise CaseFormatError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


def _reject_constant(name: str) -> float:
    # Python's json accepts NaN/Infinity literals, which are not JSON; FORMAT.md uses strings.
    raise CaseFormatError(f'{name} is not JSON; write non-finite floats as "nan", "inf", "-inf"')


def build_case(obj: Any, file: str, line: int) -> Case:
    """Validate a decoded JSON value as a case and decode its tensors."""
    if not isinstance(obj, dict):
        raise CaseFormatError(f"a case must be a JSON object, got {json_type(obj)}")
    for key, kind in _REQUIRED.items():
        if key not in obj:
            raise CaseFormatError(f"missing key {key!r}")
        if not isinstance(obj[key], kind):
            raise CaseFormatError(f"{key!r} must be {_KIND_NAMES[kind]}, got {json_type(obj[key])}")
    for key, value in obj.items():
        if key in _OPTIONAL:
            if not isinstance(value, _OPTIONAL[key]):
                raise CaseFormatError(f"{key!r} must be a string, got {json_type(value)}")
        elif key not in _REQUIRED:
            raise CaseFormatError(
                f"unknown key {key!r} (a case has {', '.join([*_REQUIRED, *_OPTIONAL])})"
            )
    if not obj["id"]:
        raise CaseFormatError("'id' must not be empty")
    if not obj["expected"]:
        raise CaseFormatError("'expected' is empty; a case must check at least one output")
    inputs = {name: decode_tensor(t, f"inputs.{name}") for name, t in obj["inputs"].items()}
    expected = {name: _decode_expected(v, name) for name, v in obj["expected"].items()}
    return Case(
        obj["id"],
        obj["backend"],
        obj["op"],
        obj["attrs"],
        inputs,
        expected,
        file,
        line,
        obj.get("source", ""),
        obj.get("note", ""),
    )


_KIND_NAMES = {str: "a string", dict: "an object"}


def _decode_expected(value: Any, name: str) -> np.ndarray | int:
    # A counter or flag is a JSON integer; true/false are not integers in JSON.
    if type(value) is int:
        return value
    if isinstance(value, dict):
        return decode_tensor(value, f"expected.{name}")
    raise CaseFormatError(
        f"expected.{name}: must be a tensor object or an integer counter, got {json_type(value)}"
    )
