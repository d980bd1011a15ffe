"""Multi-input models through the Python API: feeds by input name, batched per input.

Float outputs are compared with onnxruntime (floats: a tolerance of float32 rounding); the
backends' codes are compared with ``==`` between ways of batching the same samples (one pass,
streamed batches, evaluation batch sizes), which must not change a code or a counter.
"""

from __future__ import annotations

import numpy as np
import pytest
from multi_input_models import feeds, scalar_gain, state_on_axis1, two_branch

import quantemu
from quantemu.calibration.feeds import FeedSamples, batch_axes
from quantemu.errors import InvalidInputError
from quantemu.graph.loading import load_model
from quantemu.simulate.against import compare_programs

ort = pytest.importorskip("onnxruntime")

BACKENDS = ("tflite", "xs3", "onednn", "nvdla", "nnie")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return two_branch(tmp_path_factory.mktemp("multi") / "two_branch.onnx")


@pytest.fixture(scope="module")
def graph(model_path):
    return load_model(model_path)


def _onnxruntime(path, data) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["y"], data)[0]


def test_batch_axes_from_the_input_shapes(graph, tmp_path):
    assert batch_axes(graph) == {"a": 0, "b": None}
    state = load_model(state_on_axis1(tmp_path / "state.onnx"))
    assert batch_axes(state) == {"a": 0, "s": 1}
    fixed = graph.with_input_shapes({"a": (1, 8)})  # one fixed leading size: not the batch
    assert batch_axes(fixed) == {"a": None, "b": None}


def test_float_model_matches_onnxruntime(graph, model_path):
    data = feeds(12)
    np.testing.assert_allclose(
        graph.run_float(data)["y"], _onnxruntime(model_path, data), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_batches_the_samples_without_changing_a_code(graph, model_path, backend):
    data = feeds(40)
    program = quantemu.compile(graph, backend, data)
    streamed = program.run(data)  # batches side by side, the unbatched input in each
    whole = program.run_feeds(data)  # one pass
    np.testing.assert_array_equal(streamed.tensors["y"].codes, whole.tensors["y"].codes)
    assert streamed.counters == whole.counters
    # the target is close to onnxruntime's float model (its quantization error only)
    reference = _onnxruntime(model_path, data)
    error = streamed.outputs["y"] - reference
    assert 10 * np.log10(np.sum(reference**2) / np.sum(error**2)) > 25


@pytest.mark.parametrize("backend", ("tflite", "onednn"))
def test_evaluate_is_the_same_for_every_batch_size(graph, backend):
    data = feeds(30)
    labels = np.arange(30) % 3
    program = quantemu.compile(graph, backend, data)
    one = program.evaluate(data, labels, batch_size=64).to_dict()
    many = program.evaluate(data, labels, batch_size=7).to_dict()
    # codes, counters, LSB errors and accuracies are equal; SQNR and cosine are float sums of
    # the float model's batches, whose float32 matmuls round by batch
    floats = ("sqnr_db", "cosine")
    for first, second in zip(one.pop("layers"), many.pop("layers"), strict=True):
        assert {k: v for k, v in first.items() if k not in floats} == {
            k: v for k, v in second.items() if k not in floats
        }
        assert [first[k] for k in floats] == pytest.approx([second[k] for k in floats], rel=1e-6)
    assert one == many
    assert one["samples"] == 30 and one["backend_accuracy"] is not None
    # the unbatched branch (b * 0.5) is measured once, not once per batch
    scale = program.evaluate(data, batch_size=7).layers[1]
    assert (scale.name, scale.elements) == ("scale", 6)


def test_calibrate_takes_feeds_and_their_npz(graph, tmp_path):
    data = feeds(20)
    np.savez(tmp_path / "feeds.npz", **data)
    by_dict = quantemu.calibrate(graph, data, batch_size=6, limit=15)
    by_file = quantemu.calibrate(graph, tmp_path / "feeds.npz", batch_size=6, limit=15)
    assert by_dict.samples == by_file.samples == 15
    assert by_dict.tensors == by_file.tensors
    # the unbatched input's range is its values, whatever the batching
    low, high = by_dict.tensors["b"]
    assert (low, high) == (float(data["b"].min()), float(data["b"].max()))


def test_both_inputs_batched(tmp_path):
    path = two_branch(tmp_path / "batched.onnx", batched_b=True)
    graph = load_model(path)
    data = feeds(25, batched_b=True)
    program = quantemu.compile(graph, "tflite", data)
    np.testing.assert_array_equal(
        program.run(data).tensors["y"].codes, program.run_feeds(data).tensors["y"].codes
    )
    with pytest.raises(InvalidInputError, match=r"different numbers of samples \('a': 25, 'b': 5"):
        program.run({"a": data["a"], "b": data["b"][:5]})


def test_state_with_the_batch_on_axis_1(tmp_path):
    path = state_on_axis1(tmp_path / "state.onnx")
    graph = load_model(path)
    rng = np.random.default_rng(3)
    data = {
        "a": rng.normal(size=(20, 8)).astype(np.float32),
        "s": rng.normal(size=(2, 20, 6)).astype(np.float32),
    }
    np.testing.assert_allclose(
        graph.run_float(data)["y"], _onnxruntime(path, data), rtol=1e-6, atol=1e-6
    )
    program = quantemu.compile(graph, "tflite", data)
    whole = program.run_feeds(data).tensors["y"].codes
    np.testing.assert_array_equal(program.run(data).tensors["y"].codes, whole)
    samples = FeedSamples(program.graph, data)
    assert samples.read(5, 9).arrays["s"].shape == (2, 4, 6)
    evaluated = program.evaluate(data, batch_size=6)
    assert evaluated.samples == 20


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_input_applies_to_every_sample(tmp_path, backend):
    path = scalar_gain(tmp_path / "gain.onnx")
    graph = load_model(path)
    data = {"a": feeds(30)["a"], "gain": np.array(1.5, np.float32)}
    np.testing.assert_allclose(
        graph.run_float(data)["y"], _onnxruntime(path, data), rtol=1e-6, atol=1e-6
    )
    program = quantemu.compile(graph, backend, data)
    streamed = program.run(data)  # batches side by side
    whole = program.run(data, keep="all")  # one pass
    np.testing.assert_array_equal(streamed.tensors["y"].codes, whole.tensors["y"].codes)
    assert streamed.counters == whole.counters
    assert program.evaluate(data, batch_size=7).samples == 30


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: {"a": d["a"]}, r"no data for input 'b'; the model's inputs: 'a' \(shape Nx8\)"),
        (lambda d: {**d, "c": d["b"]}, r"no input named 'c'; the model's inputs"),
        (lambda d: {**d, "b": np.zeros((2, 6), np.float32)}, r"input 'b' has shape \(2, 6\); "
         r"the model takes shape 6 \(it has no batch dimension"),
        (lambda d: {**d, "a": d["a"].astype(np.int64)}, r"input 'a' has dtype int64; pass float"),
        (lambda d: {**d, "a": d["a"][:, :5]}, r"input 'a' has shape \(10, 5\); the model takes "
         r"shape Nx8 \(the samples run along axis 0\)"),
        (lambda d: d["a"], r"takes a dict \{input name: array\}, got ndarray"),
    ],
)  # fmt: skip
def test_bad_feeds_name_the_input_and_the_remedy(graph, change, message):
    program = quantemu.compile(graph, "tflite", feeds(10))
    with pytest.raises(InvalidInputError, match=message):
        program.run(change(feeds(10)))


def test_non_finite_feeds_name_the_input_and_the_sample(graph, tmp_path):
    data = feeds(10)
    data["a"][3, 2] = np.nan
    with pytest.raises(InvalidInputError, match=r"input 'a': sample 3, element \(2,\) is NaN"):
        quantemu.calibrate(graph, data)
    state = load_model(state_on_axis1(tmp_path / "state.onnx"))
    bad = {"a": feeds(4)["a"], "s": np.zeros((2, 4, 6), np.float32)}
    bad["s"][1, 2, 0] = np.inf
    with pytest.raises(InvalidInputError, match=r"input 's': sample 2, element \(1, 0\) is \+Inf"):
        FeedSamples(state, bad)


def test_against_counts_the_unbatched_layer_once(graph):
    data = feeds(30)
    tflite = quantemu.compile(graph, "tflite", data)
    xs3 = quantemu.compile(graph, "xs3", data)
    one = compare_programs((tflite, xs3), data, batch_size=64)
    many = compare_programs((tflite, xs3), data, batch_size=7)
    assert [row.__dict__ for row in one.layers] == [row.__dict__ for row in many.layers]
    scale = next(row for row in many.layers if row.layer == "scale")
    assert (many.samples, scale.elements) == (30, 6)
