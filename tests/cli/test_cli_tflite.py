"""``quantemu run`` on int8 TFLite models: no --calib, int8 --eval codes, --save-outputs,
--against; the documented check_models flow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantemu.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "models_xs3_public"


@pytest.fixture
def x_path(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.load(DATA / "depthwise_sep.npz")["x_int8"])
    return path


@pytest.mark.parametrize(("backend", "key"), [("tflite", "y_tflite_ref"), ("xs3", "y_xcore")])
def test_save_outputs_reproduce_the_references(capsys, tmp_path, x_path, backend, key):
    out = tmp_path / "out.npz"
    model = DATA / "depthwise_sep.int8.tflite"
    code = main(["run", str(model), "--backend", backend, "--eval", str(x_path), "-q",
                 "--save-outputs", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    saved = np.load(out)
    assert saved.files == ["StatefulPartitionedCall:0"]
    got = saved["StatefulPartitionedCall:0"]
    assert got.dtype == np.int8
    assert np.array_equal(got, np.load(DATA / "depthwise_sep.npz")[key])


def test_float_eval_data_is_quantized_with_the_input_quantization(capsys, tmp_path):
    from quantemu.graph import load_tflite

    graph = load_tflite(DATA / "mlp.int8.tflite")
    ov = graph.quant_overrides[graph.inputs[0].name]
    codes = np.load(DATA / "mlp.npz")["x_int8"]
    x = ((codes.astype(np.float64) - int(ov.zero_point)) * float(ov.scale)).astype(np.float32)
    np.save(tmp_path / "xf.npy", x)
    out = tmp_path / "o.npz"
    code = main(["run", str(DATA / "mlp.int8.tflite"), "--backend", "tflite", "-q",
                 "--eval", str(tmp_path / "xf.npy"), "--save-outputs", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert np.array_equal(
        np.load(out)["StatefulPartitionedCall:0"], np.load(DATA / "mlp.npz")["y_tflite_ref"]
    )


def test_against_reports_where_targets_differ(capsys, x_path):
    model = DATA / "depthwise_sep.int8.tflite"
    code = main(["run", str(model), "--backend", "xs3", "--against", "tflite", "-q",
                 "--no-layers", "--eval", str(x_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "xs3 against tflite" in out and "XC_conv2d_v2" in out
    assert "layers differ; the first is depthwise_conv_2d_0" in out
    assert "Layers that differ by themselves: depthwise_conv_2d_0" in out


def test_wrong_integer_dtype_is_a_clear_error(capsys, tmp_path):
    np.save(tmp_path / "x16.npy", np.zeros((2, 28, 28, 16), np.int16))
    model = DATA / "depthwise_sep.int8.tflite"
    code = main(["run", str(model), "--backend", "tflite", "--eval", str(tmp_path / "x16.npy")])
    err = capsys.readouterr().err
    assert code == 1 and "int16" in err and "int8" in err


def test_pre_quantized_model_needs_eval_data(capsys):
    code = main(["run", str(DATA / "mlp.int8.tflite"), "--backend", "tflite"])
    assert code == 2 and "--eval DATA is required" in capsys.readouterr().err


def test_save_outputs_needs_one_backend(capsys, x_path):
    code = main(["run", str(DATA / "mlp.int8.tflite"), "--backend", "all", "--eval",
                 str(x_path), "--save-outputs", "o.npz"])  # fmt: skip
    assert code == 2 and "one --backend" in capsys.readouterr().err
