"""oneDNN 3.2.0 itself, live: fresh LSTM/GRU vectors from the library (another seed than the
committed ones) pass the emulation. Skipped where the library, its headers or a C compiler is
missing (``pip install 'quantemu[peers]'`` brings the library)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from quantemu.conformance import collect_files, run_suite

pytestmark = pytest.mark.peer

ROOT = Path(__file__).resolve().parents[3]
WHEELS = {"onednn-cpu-gomp": "2023.2.0", "onednn-devel-cpu-gomp": "2023.2.0"}


def _require_library() -> None:
    for wheel, version in WHEELS.items():
        try:
            found = importlib.metadata.version(wheel)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{wheel}=={version} (oneDNN 3.2.0) is not installed")
        if found != version:
            pytest.skip(f"{wheel} {found} is installed, the oracle is {version}")
    prefix = Path(sysconfig.get_paths()["data"])
    if not (prefix / "lib" / "libdnnl.so.3").exists():
        pytest.skip(f"libdnnl.so.3 is not in {prefix / 'lib'}")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler (cc) to build the oneDNN oracle")


@pytest.mark.parametrize("seed", [11])
def test_fresh_onednn_vectors_pass(tmp_path, seed):
    _require_library()
    tool = ROOT / "tools" / "make_onednn_rnn_vectors.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--seed", str(seed), "--out", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    totals = run_suite(collect_files([tmp_path])).totals()
    assert totals.total == 96 and totals.passed == 96
