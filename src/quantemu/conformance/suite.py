"""The public conformance suite that ships inside the package (``vectors/``).

It is located through :mod:`importlib.resources`, so it is found the same way in a source
checkout, an editable install and an installed wheel. ``tools/sync_vectors.py`` regenerates it
from ``shared/conformance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from quantemu.conformance.reader import SuiteError, VectorFile, collect_files, collect_tree

# How reports name the bundled files: a prefix that cannot be mistaken for a path on disk.
BUNDLED_PREFIX = "<bundled>/"


def bundled_root() -> Traversable:
    """The directory of the bundled vectors (``quantemu/conformance/vectors``)."""
    return files("quantemu.conformance") / "vectors"


def bundled_files() -> list[VectorFile]:
    """Every bundled vector file, sorted; :class:`SuiteError` when the copy is missing."""
    root = bundled_root()
    found = collect_tree(root, BUNDLED_PREFIX) if root.is_dir() else []
    if not found:
        raise SuiteError(
            f"the bundled conformance suite is missing ({root}); reinstall quantemu, or in a "
            "checkout run tools/sync_vectors.py, or name vector files or directories explicitly"
        )
    return found


def collect_named(paths: Sequence[str]) -> list[VectorFile]:
    """The vector files ``paths`` name: paths on disk, else bundled names.

    ``xs3/conv2d_deep.jsonl`` finds ``xs3/conv2d_deep.jsonl.gz`` (on disk or bundled), and a
    bundled directory name such as ``xs3`` its files, so that the names the README and the
    reports use work as arguments. A name found nowhere is a :class:`SuiteError`.
    """
    found: list[VectorFile] = []
    for raw in paths:
        if Path(raw).exists():
            found.extend(collect_files([raw]))
        elif Path(f"{raw}.gz").is_file():
            found.extend(collect_files([f"{raw}.gz"]))
        else:
            found.extend(_bundled_named(raw))
    unique: dict[str, VectorFile] = {}
    for vf in found:
        unique.setdefault(vf.display, vf)
    return list(unique.values())


def _bundled_named(raw: str) -> list[VectorFile]:
    name = raw.removeprefix(BUNDLED_PREFIX).strip("/")
    root = bundled_root()
    bundled = collect_tree(root, BUNDLED_PREFIX) if root.is_dir() else []
    prefix = BUNDLED_PREFIX + name
    matches = [vf for vf in bundled if vf.display in (prefix, f"{prefix}.gz")]
    matches = matches or [vf for vf in bundled if vf.display.startswith(prefix + "/")]
    if not matches:
        raise SuiteError(
            f"{raw!r} does not exist, neither as a path nor as a bundled vector file (bundled "
            "names look like xs3/conv2d_deep.jsonl; run quantemu conformance without PATH for all)"
        )
    return matches
