"""The NVDLA cmod vector generators of ``tools/`` (not a package) for the live peer tests: load
one by name, or skip cleanly where it cannot build (no g++, no nvdla/hw sources)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[3] / "tools"


def load_tool(name: str):
    """``tools/<name>.py`` as a module (registered under ``name``, as the tools import one
    another by name)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cmod_tool(name: str, unit: str):
    """:func:`load_tool`, or a skip naming ``unit`` where g++ or the nvdla/hw sources are
    missing (``QUANTEMU_NVDLA_HW``: a checkout or mirror of https://github.com/nvdla/hw)."""
    tool = load_tool(name)
    if shutil.which("g++") is None:
        pytest.skip(f"no g++ to build NVIDIA's cmod {unit}")
    hw = sys.modules["nvdla_cmod_fp"].default_hw()  # imported by every generator
    if not Path(hw).exists():
        pytest.skip(f"no nvdla/hw sources at {hw} (set QUANTEMU_NVDLA_HW)")
    return tool
