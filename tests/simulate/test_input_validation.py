"""Data checked at every entry (issue 16, item 1): run, run_feeds, evaluate, calibrate.

Each bad input is one :class:`InvalidInputError` naming the input, the first offending index and
the remedy; special values (NaN, +-Inf) are refused before any backend sees them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model

import quantemu
from quantemu.calibration.api import calibrate
from quantemu.cli import main
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.graph import load_onnx
from quantemu.graph.inputs import check_weights
from quantemu.report.terminal import summary_table

BACKENDS = ("tflite", "xs3", "nvdla", "onednn", "nnie")
SPECIALS = {"NaN": np.nan, "+Inf": np.inf, "-Inf": -np.inf}


@pytest.fixture(scope="module")
def data():
    x, y = demo_dataset()
    return x[:64].copy(), y[:64].copy()


@pytest.fixture(scope="module")
def graph():
    return load_onnx(demo_model_path())


@pytest.fixture(scope="module")
def programs(graph, data):
    return {b: quantemu.compile(graph, b, calib=data[0][:32]) for b in BACKENDS}


def _with(x, index, value, dtype=np.float32):
    x = x.astype(dtype, copy=True)
    x[index] = value
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("word", SPECIALS)
def test_run_refuses_special_values_on_every_backend(programs, data, backend, word):
    x = _with(data[0][:4], (3, 0, 2, 5), SPECIALS[word])
    with pytest.raises(InvalidInputError) as info:
        programs[backend].run(x)
    message = str(info.value)
    assert f"input 'input': sample 3, element (0, 2, 5) is {word}" in message
    assert "np.nan_to_num" in message and "refuses NaN and +-Inf" in message


def test_evaluate_names_the_global_sample_beyond_the_first_batch(programs, data):
    x = _with(data[0], (40, 0, 7, 1), np.nan)
    with pytest.raises(InvalidInputError, match=r"sample 40, element \(0, 7, 1\) is NaN"):
        programs["xs3"].evaluate(x, data[1], batch_size=16)


def test_evaluate_counts_every_non_finite_value(programs, data):
    x = _with(_with(data[0], (2, 0, 0, 0), np.inf), (9, 0, 1, 1), -np.inf)
    with pytest.raises(InvalidInputError, match=r"sample 2, element \(0, 0, 0\) is \+Inf \(2 "):
        programs["onednn"].evaluate(x)


def test_float64_beyond_float32_range_is_refused(programs, data):
    x = _with(data[0][:2], (1, 0, 3, 3), 1e39, np.float64)
    with pytest.raises(InvalidInputError, match=r"sample 1, .* is 1e\+39 \(beyond float32's range"):
        programs["nvdla"].run(x)


@pytest.mark.parametrize("call", ["run", "evaluate"])
def test_zero_samples(programs, call):
    x = np.zeros((0, 1, 8, 8), np.float32)
    with pytest.raises(InvalidInputError, match=r"'input' holds no samples.*at least one sample"):
        getattr(programs["tflite"], call)(x)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((2, 8, 8), np.float32), r"expected shape \(N, 1, 8, 8\), got \(2, 8, 8\)"),
        (np.zeros((2, 8, 8, 1), np.float32), r"got \(2, 8, 8, 1\); pass the samples batch first"),
        (np.zeros((2, 1, 8, 8), np.complex64), r"dtype complex64.*numeric NumPy array"),
        (np.array([["a"]]), r"dtype <U1.*numeric NumPy array"),
        ([[1.0, 2.0], [3.0]], r"not a rectangular array.*one NumPy array"),
        (np.zeros((2, 1, 8, 8), bool), r"expected float data.*got dtype bool"),
        (np.zeros((2, 1, 8, 8), np.int16), r"integer data of dtype int16.*it takes float data"),
    ],
)
def test_run_wrong_shape_or_dtype(programs, x, match):
    with pytest.raises(InvalidInputError, match=match):
        programs["xs3"].run(x)


def test_run_feeds_takes_the_right_names_only(programs, data):
    prog = programs["onednn"]
    x = data[0][:3]
    same = prog.run_feeds({"input": x}).outputs["logits"]
    np.testing.assert_array_equal(same, prog.run(x).outputs["logits"])
    with pytest.raises(InvalidInputError, match=r"unknown input name\(s\) \['nope'\].*'input'"):
        prog.run_feeds({"nope": x})
    with pytest.raises(InvalidInputError, match=r"name\(s\) \['extra'\], missing \[\]"):
        prog.run_feeds({"input": x, "extra": x})
    with pytest.raises(InvalidInputError, match=r"takes a dict \{input name: array\}, got ndarray"):
        prog.run_feeds(x)


@pytest.mark.parametrize(
    ("feed", "match"),
    [
        (np.zeros((2, 1, 8, 8), np.int32), r"'input' has dtype int32; pass float data"),
        (np.zeros((2, 64), np.float32), r"expected shape \(N, 1, 8, 8\), got \(2, 64\)"),
        (np.zeros((0, 1, 8, 8), np.float32), r"holds no samples"),
        (_with(np.zeros((2, 1, 8, 8)), (1, 0, 4, 4), -np.inf), r"sample 1, .* is -Inf"),
        (np.array([None, None]), r"dtype object .*numeric NumPy array"),
    ],
)
def test_run_feeds_checks_each_feed(programs, feed, match):
    with pytest.raises(InvalidInputError, match=match):
        programs["nnie"].run_feeds({"input": feed})


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        (np.r_[np.zeros(5, int), -1, np.zeros(58, int)], r"label 5 is -1, outside the 10 classes"),
        (np.r_[np.zeros(7, int), 10, 12, np.zeros(55, int)], r"label 7 is 10, .*\(2 such"),
        (np.r_[np.zeros(3), 1.5, np.zeros(60)], r"label 3 is 1\.5, not an integer class index"),
        (np.zeros(64), r"dtype float64; .*labels\.astype\(np\.int64\)"),
        (np.zeros(63, int), r"one label per sample \(64\), got shape \(63,\)"),
        (np.eye(10, dtype=int)[np.zeros(64, int)], r"one-hot or scores.*labels\.argmax\(axis=1\)"),
        (np.zeros(64, bool), r"dtype bool; pass integer class indices"),
    ],
)
def test_labels_are_checked_against_the_classes(programs, data, labels, match):
    with pytest.raises(InvalidInputError, match=match):
        programs["tflite"].evaluate(data[0], labels)


def test_good_data_still_gives_accuracies(programs, data):
    ev = programs["xs3"].evaluate(data[0], data[1])
    assert ev.backend_accuracy > 0.8 and ev.agreement > 0.9 and "top-1" not in ev.header


@pytest.fixture(scope="module")
def image_model():
    """A model whose output is an image (N, 2, 3), not class scores."""
    graph = load_onnx(model([helper.make_node("Relu", ["x"], ["y"])], {"x": ["N", 2, 3]}, ["y"]))
    calib = np.random.default_rng(0).normal(size=(8, 2, 3)).astype(np.float32)
    return quantemu.compile(graph, "tflite", calib=calib), calib


def test_non_classifier_output_gets_no_top1(image_model):
    prog, x = image_model
    ev = prog.evaluate(x)
    assert (ev.float_accuracy, ev.backend_accuracy, ev.agreement) == (None, None, None)
    assert "not (N, classes) class scores" in ev.header["top-1"]
    assert ev.to_dict()["agreement"] is None
    rows = [str(cell) for column in summary_table(ev).columns for cell in column._cells]
    assert "not computed: the output is not (N, classes) class scores" in rows
    assert not any("samples have the" in row for row in rows)


def test_non_classifier_with_labels_is_refused(image_model):
    prog, x = image_model
    with pytest.raises(InvalidInputError, match=r"output 'y' has shape \('N', 2, 3\), not \(N, "):
        prog.evaluate(x, np.zeros(len(x), int))


def _broken(graph, tensor, index, value):
    weights = dict(graph.initializers)
    weights[tensor] = _with(np.asarray(weights[tensor]), index, value)
    return dataclasses.replace(graph, initializers=weights)


@pytest.mark.parametrize("word", SPECIALS)
def test_compile_names_broken_weights(graph, data, word):
    broken = _broken(graph, "onnx::Conv_48", (3, 0, 1, 2), SPECIALS[word])
    with pytest.raises(InvalidInputError) as info:
        quantemu.compile(broken, "xs3", calib=data[0])
    message = str(info.value)
    assert f"weights contain {word} at tensor 'onnx::Conv_48' index (3, 0, 1, 2)" in message
    assert "fix the model" in message and "calibration data" not in message


def test_calibrate_names_broken_weights(graph, data):
    broken = _broken(graph, "fc.bias", (4,), np.nan)
    with pytest.raises(InvalidInputError, match=r"NaN at tensor 'fc.bias' index \(4,\).*fix the"):
        calibrate(broken, data[0], progress=False)


def test_minus_inf_outside_weights_is_a_deliberate_constant():
    add = helper.make_node("Add", ["x", "mask"], ["y"])  # an attention mask's -Inf is meant
    mask = np.array([0.0, -np.inf, 0.0, -np.inf], np.float32)
    check_weights(load_onnx(model([add], {"x": ["N", 4]}, ["y"], {"mask": mask})))
    mask[2] = np.nan
    with pytest.raises(InvalidInputError, match=r"NaN at tensor 'mask' index \(2,\)"):
        check_weights(load_onnx(model([add], {"x": ["N", 4]}, ["y"], {"mask": mask})))


@pytest.mark.parametrize("word", SPECIALS)
def test_calibrate_names_the_sample_in_the_whole_set(graph, data, word):
    x = _with(data[0], (40, 0, 1, 6), SPECIALS[word])
    with pytest.raises(InvalidInputError) as info:
        calibrate(graph, x, batch_size=16, progress=False)
    assert f"calibration data 'input': sample 40, element (0, 1, 6) is {word}" in str(info.value)
    assert isinstance(info.value, QuantemuError)


def test_command_line_refuses_nan_evaluation_data(tmp_path, data, capsys):
    path = tmp_path / "eval.npy"
    np.save(path, _with(data[0], (3, 0, 2, 5), np.nan))
    code = main(["run", "demo", "--backend", "xs3", "-q", "--eval", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "sample 3, element (0, 2, 5) is NaN" in err and "nan_to_num" in err
