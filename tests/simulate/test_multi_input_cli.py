"""``quantemu run`` on a model with two inputs: --calib/--eval as one .npz keyed by input name.

The real backends run (the model is four small layers); the numbers are checked against the
Python API on the same data, and every bad data file against its message.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from multi_input_models import feeds, two_branch

import quantemu
from quantemu.cli import main
from quantemu.graph.loading import load_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The two-branch model, calibration and evaluation feeds (with labels y), bad files."""
    root = tmp_path_factory.mktemp("multi_cli")
    two_branch(root / "model.onnx")
    np.savez(root / "calib.npz", **feeds(30, seed=2))
    np.savez(root / "eval.npz", **feeds(40, seed=3), y=np.arange(40) % 3)
    good = feeds(10)
    np.savez(root / "missing.npz", a=good["a"])
    np.savez(root / "unknown.npz", **good, c=good["b"])
    np.savez(root / "counts.npz", a=good["a"], b=np.zeros((4, 6), np.float32))
    np.savez(root / "ints.npz", a=(good["a"] * 10).astype(np.int8), b=good["b"])
    nan = dict(good)
    nan["a"] = good["a"].copy()
    nan["a"][7, 1] = np.nan
    np.savez(root / "nan.npz", **nan)
    np.save(root / "one.npy", good["a"])
    return root


def _run(capsys, *argv):
    code = main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_feeds_by_input_name_with_labels(files, capsys, tmp_path):
    code, _out, err = _run(
        capsys, files / "model.onnx", "--backend", "tflite", "--calib", files / "calib.npz",
        "--eval", files / "eval.npz", "--labels", "y", "--json", tmp_path / "r.json",
        "--save-outputs", tmp_path / "codes.npz", "-q",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads((tmp_path / "r.json").read_text())["evaluations"][0]
    assert result["samples"] == 40
    # the same numbers as the Python API on the same feeds
    graph = load_model(files / "model.onnx")
    with np.load(files / "calib.npz") as calib, np.load(files / "eval.npz") as data:
        program = quantemu.compile(graph, "tflite", dict(calib))
        x, labels = {k: data[k] for k in ("a", "b")}, data["y"]
    expected = program.evaluate(x, labels, batch_size=64)
    assert result["backend_accuracy"] == expected.backend_accuracy
    assert result["counters"] == expected.counter_totals()
    assert [layer["max_abs_lsb"] for layer in result["layers"]] == [
        layer.max_abs_lsb for layer in expected.layers
    ]
    with np.load(tmp_path / "codes.npz") as codes:
        np.testing.assert_array_equal(codes["y"], program.run(x).tensors["y"].codes)


def test_every_backend_and_against(files, capsys):
    code, out, err = _run(
        capsys, files / "model.onnx", "--backend", "all", "--calib", files / "calib.npz",
        "--no-layers", "-q",
    )  # fmt: skip
    assert code == 0, err
    assert "30 samples" in out
    code, out, err = _run(
        capsys, files / "model.onnx", "--backend", "tflite", "--against", "xs3", "--calib",
        files / "calib.npz", "--no-layers", "-q",
    )  # fmt: skip
    assert code == 0, err
    assert "tflite against xs3" in out


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.npz", "no data for input 'b'; the model's inputs: 'a' (shape Nx8), 'b' "
         "(shape 6)"),
        ("unknown.npz", "no input named 'c'"),
        ("counts.npz", "input 'b' has shape (4, 6); the model takes shape 6 (it has no batch "
         "dimension"),
        ("ints.npz", "input 'a' has dtype int8; pass float data"),
        ("nan.npz", "input 'a': sample 7, element (1,) is NaN"),
        ("one.npy", "the model has 2 inputs ('a' (shape Nx8), 'b' (shape 6)); give one .npz "
         "file keyed by input name"),
    ],
)  # fmt: skip
def test_bad_feeds_files(files, capsys, name, message):
    for option in ("--calib", "--eval"):
        argv = [files / "model.onnx", "--backend", "tflite", option, files / name, "-q"]
        if option == "--eval":
            argv += ["--calib", files / "calib.npz"]
        code, _out, err = _run(capsys, *argv)
        assert code == 1, (option, err)
        text = " ".join(err.split())
        assert f"{option} {files / name}" in text and message in text, text


def test_a_key_option_is_refused_for_feeds(files, capsys):
    code, _out, err = _run(
        capsys, files / "model.onnx", "--backend", "tflite", "--calib", files / "calib.npz",
        "--calib-key", "a", "-q",
    )  # fmt: skip
    assert code == 1
    assert "--calib-key selects one array: leave it out" in " ".join(err.split())


def test_calibrate_then_run_with_the_ranges(files, capsys, tmp_path):
    ranges = tmp_path / "ranges.json"
    code = main(["calibrate", str(files / "model.onnx"), "--calib", str(files / "calib.npz"),
                 "--out", str(ranges), "-q"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(ranges.read_text())["samples"] == 30
    code, _out, err = _run(
        capsys, files / "model.onnx", "--backend", "onednn", "--ranges", ranges, "--eval",
        files / "eval.npz", "--labels", "y", "--json", tmp_path / "r.json", "-q",
    )  # fmt: skip
    assert code == 0, err
    with_ranges = json.loads((tmp_path / "r.json").read_text())["evaluations"][0]
    code, _out, err = _run(
        capsys, files / "model.onnx", "--backend", "onednn", "--calib", files / "calib.npz",
        "--eval", files / "eval.npz", "--labels", "y", "--json", tmp_path / "c.json", "-q",
    )  # fmt: skip
    assert code == 0, err
    calibrated = json.loads((tmp_path / "c.json").read_text())["evaluations"][0]
    assert with_ranges["layers"] == calibrated["layers"]
