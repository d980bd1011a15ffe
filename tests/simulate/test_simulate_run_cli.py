"""``quantemu run``: data and label files, options, outputs, exit statuses and error messages.

Every backend lowers through the fake lowering (``fake_backends``), so these tests exercise the
command itself, whichever real lowerings exist.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from quantemu.cli import main
from quantemu.cli.options import parse_options
from quantemu.data import demo_dataset, demo_model_path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Calibration .npy, evaluation .npz (x, y) and labels .npy files from the demo splits."""
    root = tmp_path_factory.mktemp("data")
    calib, _ = demo_dataset("calib")
    x, y = demo_dataset("test")
    np.save(root / "calib.npy", calib[:64])
    np.savez(root / "eval.npz", x=x[:50], y=y[:50])
    np.save(root / "labels.npy", y[:50])
    np.save(root / "short_labels.npy", y[:49])
    np.save(root / "int_calib.npy", (calib[:8] * 16).astype(np.uint8))
    np.save(root / "empty.npy", np.zeros((0, 1, 8, 8), np.float32))
    np.save(root / "wrong_shape.npy", calib[:8, 0])
    return root


def _run(capsys, *argv):
    code = main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_one_backend_with_labels_key(fake_backends, data, capsys, tmp_path):
    code, out, err = _run(
        capsys,
        demo_model_path(),
        "--backend",
        "onednn",
        "--isa",
        "avx2",
        "--calib",
        data / "calib.npy",
        "--eval",
        data / "eval.npz",
        "--labels",
        "y",
        "--json",
        tmp_path / "r.json",
        "-q",
    )
    assert code == 0, err
    assert err == ""  # -q: no status lines, no progress bars
    assert "quantemu · onednn" in out and "isa          avx2" in out and "/fc/Gemm" in out
    assert "float top-1" in out and "of 50 samples" in out
    document = json.loads((tmp_path / "r.json").read_text())
    (ev,) = document["evaluations"]
    assert ev["samples"] == 50 and ev["header"]["isa"] == "avx2"
    assert ev["header"]["calibration"] == "minmax, 64 samples"
    assert document["model"] == "digits_cnn.onnx"


def test_run_all_compares_backends_and_labels_file(fake_backends, data, capsys):
    code, out, err = _run(
        capsys,
        "demo",
        "--backend",
        "all",
        "--calib",
        data / "calib.npy",
        "--eval",
        data / "eval.npz",
        "--labels",
        data / "labels.npy",
        "--no-layers",
    )
    assert code == 0, err
    assert "float model vs each backend" in out and "per-layer error" not in out
    for backend in ("xs3", "nvdla", "onednn", "nnie"):
        assert f"quantemu · {backend}" in out and f"{backend}: compiled in" in err


def test_run_demo_defaults_and_json_on_stdout(fake_backends, capsys):
    code, out, _ = _run(capsys, "demo", "--backend", "xs3", "--json", "-", "-q")
    assert code == 0
    (ev,) = json.loads(out)["evaluations"]  # stdout holds only the JSON document
    assert ev["samples"] == 360 and ev["float_accuracy"] is not None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--calib", "wrong_shape.npy"], "--calib {d}/wrong_shape.npy: input 'input' has shape"),
        (["--calib", "int_calib.npy"], "has dtype uint8; calibration data must be float"),
        (["--calib", "empty.npy"], "holds no samples (shape (0, 1, 8, 8))"),
        (["--calib", "missing.npy"], "missing.npy does not exist"),
        (
            ["--calib", "calib.npy", "--eval", "calib.npy", "--labels", "labels.npy"],
            "expected 64 integer class labels (one per --eval sample), got dtype int64 shape (50,)",
        ),
        (
            ["--calib", "calib.npy", "--eval", "eval.npz", "--labels", "short_labels.npy"],
            "expected 50 integer class labels",
        ),
        (
            ["--calib", "calib.npy", "--eval", "eval.npz", "--labels", "z"],
            "--labels 'z': no array 'z' in {d}/eval.npz; its arrays: x, y",
        ),
        (["--calib", "calib.npy", "--eval", "int_calib.npy"], "--eval {d}/int_calib.npy: "),
    ],
)
def test_run_bad_data_exits_1_with_one_line(fake_backends, data, capsys, argv, message):
    argv = [str(data / a) if a.endswith((".npy", ".npz")) else a for a in argv]
    code, _, err = _run(capsys, demo_model_path(), "--backend", "xs3", "-q", *argv)
    assert code == 1
    assert err.startswith("quantemu run: error: ") and err.count("\n") == 1, err
    assert message.format(d=data) in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "xs3", "--isa", "avx2"], "--isa avx2: backend xs3 has no ISA choice"),
        (["--backend", "xs3", "--option", "fast"], "--option 'fast': expected KEY=VALUE"),
        (
            ["--backend", "xs3", "--option", "tpu.x=1"],
            "'tpu' is not a backend; backends: xs3, nvdla, onednn, nnie",
        ),
        (["--backend", "xs3", "--option", "onednn.isa=avx2"], "is for onednn, which is not"),
        (["--backend", "xs3", "--labels", "y"], "--labels needs --eval DATA"),
    ],
)
def test_run_usage_errors_exit_2(fake_backends, capsys, argv, message):
    code, _, err = _run(capsys, "demo", "-q", *argv)
    assert code == 2
    assert err.startswith("quantemu run: error: ") and message in err, err


def test_run_unknown_option_names_it_before_calibrating(fake_backends, capsys):
    code, _, err = _run(capsys, "demo", "--backend", "onednn", "--option", "speed=3", "-q")
    assert code == 2 and err.count("\n") == 1, err
    assert "unknown option(s) 'speed'; the options are isa" in err


def test_run_unknown_backend_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "demo", "--backend", "tpu"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tpu'" in err and "'xs3'" in err and "'all'" in err


def test_run_needs_calibration_data(capsys):
    from quantemu.data import demo_model_path

    code, _, err = _run(capsys, str(demo_model_path()), "--backend", "xs3")
    assert code == 2 and "--calib DATA is required" in err


def test_run_missing_model_is_exit_1(fake_backends, capsys, data):
    code, _, err = _run(capsys, "nope.onnx", "--backend", "xs3", "--calib", data / "calib.npy")
    assert code == 1 and err.startswith("quantemu run: error: ") and "nope.onnx" in err


def test_run_report_without_matplotlib(fake_backends, capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    code, out, err = _run(capsys, "demo", "--backend", "xs3", "--report", tmp_path / "r.html")
    assert code == 2 and out == ""
    assert err == (
        "quantemu run: error: the HTML report needs matplotlib, which is not installed: "
        "pip install 'quantemu[report]'\n"
    )
    assert not (tmp_path / "r.html").exists()


def test_run_writes_html_report(fake_backends, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code, _, err = _run(
        capsys, "demo", "--backend", "all", "--report", tmp_path / "r.html", "--no-layers"
    )
    assert code == 0, err
    text = (tmp_path / "r.html").read_text()
    assert "Comparison" in text and text.count("data:image/png;base64,") >= 4


def test_run_unwritable_output_is_exit_2(fake_backends, capsys, tmp_path):
    code, _, err = _run(
        capsys, "demo", "--backend", "xs3", "-q", "--json", tmp_path / "no" / "r.json"
    )
    assert code == 2 and "cannot write" in err and "r.json" in err


def test_parse_options_scopes_and_keeps_values_as_text():
    # The backend's options class types the values (tests/cli/test_cli_options.py).
    options = parse_options(
        ["alpha=3", "onednn.isa=avx2", "nvdla.lut=false", "name=x.y"], ["nvdla", "onednn"], None
    )
    assert options == {
        "nvdla": {"alpha": "3", "lut": "false", "name": "x.y"},
        "onednn": {"alpha": "3", "isa": "avx2", "name": "x.y"},
    }
