"""What the bad-input catalog's cases share: the :class:`Bad` record and cheap setup.

Each :class:`Bad` is one mistake: a zero-argument call that makes it, the exception it must
raise, and the key words its message must hold (the offending value, the remedy). CLI cases
raise :class:`CliRefused` (the exit status and standard error); a malformed conformance vector
line raises :class:`VectorRejected` (the runner reports such a line as malformed, with its
reason, instead of raising).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import quantemu
from quantemu.conformance.reader import MalformedCase, parse_line
from quantemu.data import demo_dataset, demo_model_path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "src" / "quantemu" / "conformance" / "vectors"


class CliRefused(Exception):
    """A command exited non-zero: ``code`` and the text it wrote to standard error."""

    def __init__(self, code: int, err: str) -> None:
        super().__init__(f"exit {code}: {err}")
        self.code = code


class VectorRejected(Exception):
    """The conformance reader turned a line into a malformed case, with this reason."""


@dataclass(frozen=True)
class Bad:
    """One catalog entry (module docstring)."""

    id: str
    what: str
    call: Callable[[], object]
    error: type[Exception]
    words: tuple[str, ...]
    exit_code: int | None = None  # CLI cases only


# -- shared setup, made on first use ----------------------------------------------------------


@functools.cache
def tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="quantemu-catalog-"))


@functools.cache
def data() -> tuple[np.ndarray, np.ndarray]:
    x, y, *_ = demo_dataset()
    return x.astype(np.float32), y


def x(n: int = 8) -> np.ndarray:
    return data()[0][:n].copy()


def with_value(value: float) -> np.ndarray:
    bad = x()
    bad[3, 0, 2, 5] = value
    return bad


@functools.cache
def program(backend: str = "xs3"):
    return quantemu.compile(demo_model_path(), backend, calib=x(32))


def compile_demo(backend: str = "xs3", **kwargs):
    kwargs.setdefault("calib", x(4))
    return quantemu.compile(demo_model_path(), backend, **kwargs)


def write(name: str, content: str | bytes) -> str:
    path = tmp() / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def cli(*argv: str) -> None:
    """Run ``quantemu ARGV`` in-process; a non-zero exit raises :class:`CliRefused`."""
    from quantemu.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    if code:
        raise CliRefused(int(code), err.getvalue())


def npy(name: str, array: np.ndarray, **kwargs) -> str:
    path = tmp() / name
    np.save(path, array, **kwargs)
    return str(path)


def vector(line: str) -> None:
    case = parse_line(line.encode(), "cases.jsonl", 7)
    if isinstance(case, MalformedCase):
        raise VectorRejected(case.reason)


def primitive(backend: str, op: str, inputs=None, attrs=None, *, folder: str | None = None):
    """The bundled suite's first ``backend/op`` case (in ``folder``, default the backend's),
    with ``inputs`` / ``attrs`` changed."""
    from quantemu.backends.registry import load_backends, lookup

    load_backends()
    with gzip.open(VECTORS / (folder or backend) / f"{op}.jsonl.gz", "rt") as f:
        case = json.loads(f.readline())
    arrays = {
        k: np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"])
        for k, v in case["inputs"].items()
    }
    arrays.update(inputs(arrays) if inputs else {})
    return lookup(backend, op).fn(arrays, {**case["attrs"], **(attrs or {})})


def _case_line(inputs: str) -> str:
    expected = '{"Y": {"dtype": "int8", "shape": [1], "data": [0]}}'
    return (
        f'{{"id": "a", "backend": "xs3", "op": "conv2d_1x1", "attrs": {{}}, '
        f'"inputs": {inputs}, "expected": {expected}}}'
    )
