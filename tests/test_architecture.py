"""The layering rules of ARCHITECTURE.md that a machine can check, on the source itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "quantemu"
MODULES = sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)
MAX_LINES = 500


def _package(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts)


def _imports(path: Path) -> set[str]:
    """Every ``quantemu...`` module the file imports, at any depth (function-level too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{a.name}" for a in node.names)
            found.add(node.module)
    return {name for name in found if name.startswith("quantemu")}


FORBIDDEN = {
    "backends.": ("quantemu.simulate", "quantemu.report", "quantemu.cli"),
    "program.": (
        "quantemu.backends",
        "quantemu.simulate",
        "quantemu.report",
        "quantemu.cli",
        "quantemu.calibration",
    ),
    "intmath.": ("quantemu.graph", "quantemu.program", "quantemu.backends", "quantemu.simulate"),
    "graph.": ("quantemu.program", "quantemu.backends", "quantemu.simulate", "quantemu.cli"),
    "simulate.": ("quantemu.cli", "quantemu.report"),
    "report.": ("quantemu.cli",),
    "conformance.": ("quantemu.cli", "quantemu.simulate"),
    "torch.": ("quantemu.backends", "quantemu.cli", "quantemu.report"),
}


@pytest.mark.parametrize("path", MODULES, ids=_package)
def test_imports_point_down_the_layers(path):
    name = _package(path)
    for prefix, banned in FORBIDDEN.items():
        if name.startswith(prefix) or name == prefix.rstrip("."):
            bad = sorted(i for i in _imports(path) if i.startswith(banned))
            assert not bad, f"{name} imports {bad}, which lie above it (ARCHITECTURE.md)"


def test_simulate_reaches_backends_only_through_the_registry():
    for path in (SRC / "simulate").glob("*.py"):
        direct = {
            i
            for i in _imports(path)
            if i.startswith("quantemu.backends.") and not i.startswith("quantemu.backends.registry")
        }
        assert not direct, f"{path.name} imports {sorted(direct)}; use the registry"


def test_nothing_is_imported_by_module_path():
    users = [_package(p) for p in MODULES if "import_module" in p.read_text(encoding="utf-8")]
    assert users == []


def test_only_cli_parses_arguments():
    users = [
        _package(p)
        for p in MODULES
        if "argparse" in _imports_text(p) and not _package(p).startswith("cli")
    ]
    assert users == []


def _imports_text(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=_package)
def test_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_package(path)} has {lines} lines (at most {MAX_LINES})"
