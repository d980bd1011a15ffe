"""Helpers for the conformance tests: build vector lines and files, and a fake operator.

(A uniquely named module rather than ``conftest``, so that test files can import it by name.)
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np


def tensor(dtype: str, shape: list[int], data: list[Any], **extra: Any) -> dict[str, Any]:
    """A tensor object as FORMAT.md writes it."""
    return {"dtype": dtype, "shape": shape, "data": data, **extra}


# A well-formed case for the fake operator ``xs3/add``: Y = X + k (int16), SAT = number of
# elements of X that are negative (a stand-in counter).
GOOD_CASE: dict[str, Any] = {
    "id": "xs3/add/000000",
    "backend": "xs3",
    "op": "add",
    "attrs": {"k": 1},
    "inputs": {"X": tensor("int16", [2, 3], [1, -2, 3, 4, 5, 6])},
    "expected": {"Y": tensor("int16", [2, 3], [2, -1, 4, 5, 6, 7]), "SAT": 1},
    "source": "hand-computed: Y = X + 1; SAT counts X < 0",
}


def make_case(case_id: str = "xs3/add/000000", **changes: Any) -> dict[str, Any]:
    """A deep copy of :data:`GOOD_CASE` with ``id`` and top-level keys replaced."""
    case = copy.deepcopy(GOOD_CASE)
    case["id"] = case_id
    case.update(changes)
    return case


def write_vectors(path: Path, lines: list[Any]) -> Path:
    """Write ``lines`` (dicts become JSON, str/bytes are written verbatim) as .jsonl[.gz]."""
    chunks = []
    for line in lines:
        text = json.dumps(line) if isinstance(line, dict) else line
        chunks.append(text if isinstance(text, bytes) else text.encode("utf-8"))
    data = b"\n".join(chunks) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def fake_add(inputs, attrs):
    """Y = X + k on int16 (the test values stay far from the rails), SAT = count of X < 0."""
    x = inputs["X"]
    return {"Y": (x + np.int16(attrs.get("k", 0))).astype(np.int16), "SAT": int((x < 0).sum())}
