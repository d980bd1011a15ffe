"""``quantemu demo``: the command with the fake lowering, then the real flow on every backend."""

from __future__ import annotations

import importlib.util
import json

import pytest
from fake_lowering import install_fake_backends

from quantemu.backends.registry import known_backends
from quantemu.cli import main
from quantemu.data import demo_info
from quantemu.errors import UnsupportedError


def _lowered(backend: str) -> bool:
    return importlib.util.find_spec(f"quantemu.backends.{backend}.lower") is not None


def test_demo_reports_and_json(fake_backends, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code = main(["demo", "--report", str(tmp_path / "html"), "--json", str(tmp_path / "d.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "float model vs each backend" in out and "360 test samples, 5 backend(s)" in out
    assert sorted(p.name for p in (tmp_path / "html").iterdir()) == [
        f"{b}.html" for b in sorted(known_backends())
    ]
    document = json.loads((tmp_path / "d.json").read_text())
    assert [ev["backend"] for ev in document["evaluations"]] == known_backends()


def test_demo_keeps_going_when_a_backend_fails(monkeypatch, capsys, tmp_path):
    error = UnsupportedError("nvdla: LRN is not supported here (test)")
    install_fake_backends(monkeypatch, {"nvdla": error})
    code = main(["demo", "-q", "--json", str(tmp_path / "d.json")])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    document = json.loads((tmp_path / "d.json").read_text())
    assert [ev["backend"] for ev in document["evaluations"]] == ["xs3", "onednn", "nnie", "tflite"]
    assert document["errors"] == {"nvdla": "nvdla: LRN is not supported here (test)"}
    row = next(line for line in out.splitlines() if line.startswith("│ nvdla"))
    assert "error" in row
    lines = [line.strip() for line in out.splitlines()]
    assert "nvdla: error: nvdla: LRN is not supported here (test)" in lines


def test_demo_layers_and_one_backend(fake_backends, capsys):
    assert main(["demo", "--backend", "onednn", "--layers", "-q"]) == 0
    out = capsys.readouterr().out
    assert "quantemu · onednn" in out and "/fc/Gemm" in out and "1 backend(s)" in out


def test_demo_on_the_real_backends(capsys, tmp_path):
    """The whole flow, as the README's first command runs it, on every lowering that exists.

    What it computes is checked here; how long it takes is measured by ``bench/demo.py``.
    """
    code = main(["demo", "-q", "--json", str(tmp_path / "demo.json")])
    out, _ = capsys.readouterr()
    present = [b for b in known_backends() if _lowered(b)]
    assert code == (0 if len(present) == len(known_backends()) else 1), out
    evaluations = {
        ev["backend"]: ev for ev in json.loads((tmp_path / "demo.json").read_text())["evaluations"]
    }
    assert sorted(evaluations) == sorted(present)
    float_accuracy = demo_info()["correct"]["quantemu"] / demo_info()["test_split"]["samples"]
    for backend, ev in evaluations.items():
        assert ev["samples"] == 360 and ev["float_accuracy"] == pytest.approx(float_accuracy)
        # an 8-bit deployment of this small CNN keeps its accuracy within a few points
        assert ev["backend_accuracy"] > float_accuracy - 0.05, backend
        assert ev["agreement"] > 0.9, backend
        assert ev["counters"], f"{backend} reports no counters"
        assert f"│ {backend}" in out
    if len(present) < len(known_backends()):
        assert "cannot lower whole models yet" in out
