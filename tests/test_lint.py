"""The tree is ruff-clean (lint and format), so CI enforces the style the README promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_clean(args):
    pytest.importorskip("ruff", reason="ruff is part of the test extra: pip install -e '.[test]'")
    targets = [p for p in ("src", "tests", "bench", "tools", "examples") if (ROOT / p).exists()]
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
