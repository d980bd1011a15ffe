"""Checks the commands run before any work: output paths and input files.

A bad ``--report``/``--json``/``--out`` path used to fail only after the whole simulation; a
text file named ``.npy`` got NumPy's ``allow_pickle`` advice. These checks read no more than the
headers of the input files and write nothing, so every command runs them before calibrating.
Each failure is an :class:`~quantemu.errors.InvalidInputError` naming the option, the path and
the remedy.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np

from quantemu.errors import InvalidInputError

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_HEADER_BYTES = 1 << 16


def check_output_file(path: str | None, option: str) -> None:
    """``path`` can be created or overwritten as a file (``None`` and ``-`` pass)."""
    if not path or path == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise InvalidInputError(
            f"cannot write {option} {path}: it is a directory; name a file in it "
            f"(e.g. {target / _example(option)})"
        )
    _check_parent(target, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise InvalidInputError(f"cannot write {option} {path}: the file is read-only")


def check_output_dir(path: str | None, option: str) -> None:
    """``path`` is a writable directory, or one that can be created (``demo --report``)."""
    if not path:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InvalidInputError(
            f"{option} {path} is a file, but {option} names a directory (one HTML file per "
            f"backend is written into it); remove the file or name a directory, e.g. "
            f"{option} {target.with_suffix('')}_reports"
        )
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InvalidInputError(f"{option} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidInputError(
            f"{option} {path}: cannot write into {existing} (permission denied)"
        )


def _check_parent(target: Path, option: str, path: str) -> None:
    parent = target.parent
    if not parent.exists():
        raise InvalidInputError(
            f"cannot write {option} {path}: the directory {parent} does not exist; create it "
            f"(mkdir -p {parent}) or choose another path"
        )
    if not parent.is_dir():
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not writable")


def _example(option: str) -> str:
    return {"--report": "report.html", "--save-outputs": "outputs.npz"}.get(option, "out.json")


def check_input_file(path: str | None, option: str) -> None:
    """``path`` exists and, when named ``.npy``/``.npz``, really is a loadable NumPy file.

    Only the headers are read: a non-NumPy file, a truncated header or a pickled object array
    is an error here, before the model is calibrated.
    """
    if path is None:
        return
    target = Path(path)
    if not target.exists():
        raise InvalidInputError(f"{option} {path} does not exist")
    if target.suffix == ".npy" and target.is_file():
        with target.open("rb") as f:
            _check_npy_stream(f, f"{option} {path}")
    elif target.suffix == ".npz" and target.is_file():
        _check_npz(target, f"{option} {path}")


def _check_npy_stream(f, what: str) -> None:
    start = f.read(len(_NPY_MAGIC))
    if start != _NPY_MAGIC:
        raise InvalidInputError(
            f"{what} is not a NumPy .npy file (it starts with {start[:8]!r}); save it with "
            "numpy.save(path, array)"
        )
    f.seek(0)
    try:
        version = np.lib.format.read_magic(f)
        header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = header(f)
    except (ValueError, OSError, EOFError) as exc:
        raise InvalidInputError(
            f"{what}: the .npy header cannot be read ({exc}); the file is truncated or "
            "corrupt: save it again with numpy.save"
        ) from None
    if dtype.hasobject:
        raise InvalidInputError(
            f"{what} holds an array of Python objects (dtype {dtype}, shape {shape}), stored "
            "with pickle, which quantemu does not load; save a numeric array, e.g. "
            "numpy.save(path, numpy.asarray(x, dtype=numpy.float32))"
        )


def _check_npz(path: Path, what: str) -> None:
    with path.open("rb") as f:
        start = f.read(len(_ZIP_MAGIC))
    if start != _ZIP_MAGIC:
        raise InvalidInputError(
            f"{what} is not a NumPy .npz file (it starts with {start[:8]!r}); save it with "
            "numpy.savez(path, x=array)"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                with archive.open(name) as member:
                    header = io.BytesIO(member.read(_HEADER_BYTES))  # the header, not the data
                    _check_npy_stream(header, f"{what} (array {name!r})")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InvalidInputError(
            f"{what}: the archive cannot be read ({exc}); save it again with numpy.savez"
        ) from None
