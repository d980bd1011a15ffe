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
    # report renders what simulate gives it: no backend, program or calibration code
    "report.": (
        "quantemu.cli",
        "quantemu.backends",
        "quantemu.program",
        "quantemu.calibration",
        "quantemu.intmath",
    ),
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


#: What only ``simulate`` (the plan and the session) may call: the pipeline's stages.
PIPELINE_CALLS = {
    "optimize",
    "run_passes",
    "calibrate",
    "compile_model",
    "lower",
    "lower_graph",
    "calibrate_for_backends",
    "make_plans",
    "plan_model",
    "prepare_graph",
}


def _calls(path: Path) -> set[str]:
    """The names of every function or method the module calls."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "lower" and not node.args:
                continue  # str.lower(), not a backend's lower(graph, ranges, options)
            found.add(name)
    return found


@pytest.mark.parametrize(
    "path", [p for p in MODULES if _package(p).startswith(("cli.", "report."))], ids=_package
)
def test_cli_and_report_leave_the_pipeline_to_simulate(path):
    # inspect --dump-passes shows the optimizer pass by pass: that is the command itself
    allowed = {"run_passes"} if _package(path) == "cli.inspect" else set()
    bad = sorted((_calls(path) & PIPELINE_CALLS) - allowed)
    assert not bad, f"{_package(path)} calls {bad}: the session in simulate/ does that"


def test_variants_are_packages_and_modules_are_named_by_concept():
    def bad(path: Path) -> bool:
        stem = path.stem
        if stem.endswith("_more") or "_more_" in stem:
            return True  # named by size, not by what it holds
        if "fp16" in stem:
            return True  # the FP16 variant lives in nvdla/fp16/
        return path.parent.name == "lower" and stem.startswith("xformer")

    found = sorted(str(p.relative_to(SRC)) for p in MODULES if bad(p))
    assert found == [], f"variant or overflow files beside their base: {found}"


def _backend_circles(package: Path) -> list[tuple[str, str]]:
    """Pairs of modules of one backend that reach each other through their imports (at any
    depth, function-level ones too; a package's ``__init__`` re-exporting is left out)."""
    modules = {
        "quantemu." + _package(p): p
        for p in MODULES
        if package in p.parents and p.name != "__init__.py"
    }
    imports = {name: (_imports(path) & set(modules)) - {name} for name, path in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                todo.extend(imports[name])
        return False

    return sorted((a, b) for a in imports for b in imports[a] if a < b and reaches(b, a))


@pytest.mark.parametrize(
    "package", sorted(p for p in (SRC / "backends").iterdir() if p.is_dir()), ids=lambda p: p.name
)
def test_no_import_circles_inside_a_backend(package):
    circles = _backend_circles(package)
    assert circles == [], f"modules of {package.name} that import each other: {circles}"


#: The one backend built on another's kernels (ARCHITECTURE.md, "The TFLite family").
BUILT_ON = {"xs3": {"tflite"}}


@pytest.mark.parametrize(
    "package", sorted(p for p in (SRC / "backends").iterdir() if p.is_dir()), ids=lambda p: p.name
)
def test_a_backend_imports_no_other_backend_but_the_one_it_is_built_on(package):
    others = {p.name for p in (SRC / "backends").iterdir() if p.is_dir()} - {package.name}
    allowed = BUILT_ON.get(package.name, set())
    found = {
        name.split(".")[2]
        for path in package.rglob("*.py")
        for name in _imports(path)
        if name.count(".") >= 2 and name.split(".")[2] in others
    }
    assert found <= allowed, f"{package.name} imports the backends {sorted(found - allowed)}"
