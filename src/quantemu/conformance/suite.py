"""The public conformance suite that ships inside the package (``vectors/``).

It is located through :mod:`importlib.resources`, so it is found the same way in a source
checkout, an editable install and an installed wheel. ``tools/sync_vectors.py`` regenerates it
from ``shared/conformance``.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

from quantemu.conformance.reader import SuiteError, VectorFile, collect_tree

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
