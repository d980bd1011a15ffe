"""``quantemu.calibrate`` and ``quantemu calibrate``: datasets, ranges, JSON, CLI."""

from __future__ import annotations

import builtins
import json

import numpy as np
import pytest

import quantemu
from quantemu.calibration import CalibrationRanges, ImageOptions, TensorRange, load_dataset
from quantemu.cli import main
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize


@pytest.fixture(scope="module")
def graph():
    return optimize(load_onnx(demo_model_path()))


@pytest.fixture(scope="module")
def calib():
    return demo_dataset("calib")[0]


def test_minmax_ranges_of_every_activation(graph, calib):
    ranges = quantemu.calibrate(graph, calib, batch_size=50)
    names = ["input", *(n.outputs[0] for n in graph.nodes)]
    assert list(ranges) == names
    assert tuple(ranges["input"]) == (float(calib.min()), float(calib.max()))
    # BLAS results may depend on the batch size, so the reference runs the same batches.
    batches = [graph.run_float(calib[i : i + 50], intermediates=True) for i in range(0, 256, 50)]
    for name in names:
        low = min(b[name].min() for b in batches)
        high = max(b[name].max() for b in batches)
        assert ranges[name] == TensorRange(low, high)
    assert ranges.samples == 256 and ranges.batches == 6 and ranges.observer == "minmax"


def test_batching_and_limit(graph, calib):
    small = quantemu.calibrate(graph, calib, batch_size=7, limit=100)
    big = quantemu.calibrate(graph, calib[:100], batch_size=64)
    assert small.samples == big.samples == 100
    assert dict(small) == dict(big)


def test_per_channel_and_json_round_trip(graph, calib, tmp_path):
    ranges = quantemu.calibrate(graph, calib, "percentile", per_channel=True, percentile=99.9)
    conv = graph.nodes[0].outputs[0]
    assert ranges[conv].axis == 1 and ranges[conv].min.shape == (16,)
    assert ranges["logits"].max.shape == (10,)
    path = tmp_path / "ranges.json"
    ranges.save(path)
    loaded = CalibrationRanges.load(path)
    assert loaded == ranges and loaded.options["percentile"] == 99.9
    document = json.loads(path.read_text())
    assert document["format"] == "quantemu-ranges" and document["per_channel"] is True


def test_mse_observer_and_selected_tensors(graph, calib):
    ranges = quantemu.calibrate(graph, calib, observer="mse", tensors=["logits"], bits=6)
    assert list(ranges) == ["logits"] and ranges.options == {"bits": 6, "symmetric": False}
    with pytest.raises(InvalidInputError, match="no activation named 'nope'"):
        quantemu.calibrate(graph, calib, tensors=["nope"])


def test_bad_arguments(graph, calib):
    with pytest.raises(InvalidInputError, match="unknown observer 'kl'"):
        quantemu.calibrate(graph, calib, observer="kl")
    with pytest.raises(InvalidInputError, match="batch_size must be a positive integer"):
        quantemu.calibrate(graph, calib, batch_size=0)
    with pytest.raises(InvalidInputError, match="has dtype uint8; calibration data must be float"):
        quantemu.calibrate(graph, demo_dataset("calib", raw=True)[0])
    with pytest.raises(InvalidInputError, match="holds no samples"):
        quantemu.calibrate(graph, calib[:0])
    with pytest.raises(
        InvalidInputError, match=r"input 'input' has shape 4x8x8, the model expects"
    ):
        quantemu.calibrate(graph, calib[:4, 0])
    with pytest.raises(InvalidInputError, match="not a quantemu ranges document"):
        CalibrationRanges.from_json({"format": "other"})


def test_progress_bar_runs(graph, calib, capsys):
    ranges = quantemu.calibrate(graph, calib[:64], progress=True, batch_size=16)
    assert ranges.samples == 64


def test_npy_npz_sources(graph, calib, tmp_path):
    np.save(tmp_path / "x.npy", calib)
    np.savez(tmp_path / "one.npz", anything=calib)
    np.savez(tmp_path / "many.npz", x=calib, labels=np.zeros(256))
    np.savez(tmp_path / "odd.npz", a=calib, b=calib)
    for source in ("x.npy", "one.npz", "many.npz"):
        assert len(load_dataset(tmp_path / source)) == 256
    assert len(load_dataset(tmp_path / "odd.npz", key="b")) == 256
    with pytest.raises(
        InvalidInputError,
        match=r"no key given and none of x, inputs, input, "
        r"images, data is in the archive; its arrays: a, b",
    ):
        load_dataset(tmp_path / "odd.npz")
    with pytest.raises(InvalidInputError, match="key 'c' is not in the archive"):
        load_dataset(tmp_path / "odd.npz", key="c")
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_dataset(tmp_path / "missing.npy")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_dataset(tmp_path / "bad.npy")


def _write_images(folder, sizes):
    image = pytest.importorskip("PIL.Image", reason="Pillow is optional: pip install pillow")
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate(sizes):
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image.fromarray(pixels).save(folder / f"img{i}.png")


def test_image_directory(graph, tmp_path):
    _write_images(tmp_path / "imgs", [(12, 10), (9, 9), (8, 8)])
    options = ImageOptions(size=(8, 8), grayscale=True, scale=1 / 255, mean=(0.5,), std=(0.5,))
    dataset = load_dataset(tmp_path / "imgs", image_options=options)
    (batch,) = list(dataset.batches(8))
    assert batch.shape == (3, 1, 8, 8) and batch.dtype == np.float32
    assert batch.min() >= -1.0 and batch.max() <= 1.0
    ranges = quantemu.calibrate(graph, tmp_path / "imgs", image_options=options)
    assert ranges.samples == 3
    rgb = load_dataset(
        tmp_path / "imgs", image_options=ImageOptions(size=(5, 6), channels_first=False)
    )
    assert next(iter(rgb.batches(2))).shape == (2, 5, 6, 3)
    with pytest.raises(InvalidInputError, match=r"images in .* have different sizes"):
        list(load_dataset(tmp_path / "imgs").batches(3))


def test_missing_pillow_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.png").write_bytes(b"not read: the check comes first")
    real_import = builtins.__import__

    def no_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError("No module named 'PIL'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    with pytest.raises(UnsupportedError, match=r"needs Pillow.*pip install pillow"):
        load_dataset(tmp_path / "imgs")


def test_empty_image_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="contains no image files"):
        load_dataset(tmp_path / "empty")


def test_cli_demo_and_files(tmp_path, calib, capsys):
    assert main(["calibrate", "demo", "--limit", "32", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["samples"] == 32 and "logits" in document["tensors"]
    np.savez(tmp_path / "calib.npz", images=calib)
    out = tmp_path / "r.json"
    args = [
        "calibrate",
        str(demo_model_path()),
        "--data",
        str(tmp_path / "calib.npz"),
        "--observer",
        "percentile",
        "--per-channel",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().err
    loaded = CalibrationRanges.load(out)
    assert loaded.per_channel and loaded.observer == "percentile"


def test_cli_errors(tmp_path, capsys):
    assert main(["calibrate", str(demo_model_path())]) == 2
    assert "--data is required" in capsys.readouterr().err
    np.save(tmp_path / "ints.npy", np.zeros((4, 1, 8, 8), np.uint8))
    assert main(["calibrate", "demo", "--data", str(tmp_path / "ints.npy")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quantemu calibrate: error:") and "dtype uint8" in err


def test_lazy_top_level_api():
    import subprocess
    import sys

    code = (
        "import sys, quantemu; assert 'onnx' not in sys.modules; "
        "import quantemu.calibration, types; "
        "assert isinstance(quantemu.calibrate, types.FunctionType); "
        "print(quantemu.load_onnx.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "load_onnx"
