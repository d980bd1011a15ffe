"""``.ci/run`` runs exactly the README's test command (quick start, step 2)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "CI=1" in ci and "pytest" in ci
    assert f"\n   {ci}\n" in readme, f"README's step 2 should show {ci!r}"
