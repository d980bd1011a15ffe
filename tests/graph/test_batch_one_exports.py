"""``graph.run_float`` on exports whose batch is fixed to 1: any number of samples, each with
onnxruntime's result for that sample alone (the model as exported, run sample by sample)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, model, run_ort, weights

from quantemu.errors import InvalidInputError
from quantemu.graph import load_onnx
from quantemu.graph.passes_shape import fixed_batch, relax_batch

pytest.importorskip("onnxruntime", reason=ORT_REASON)


def _relaxable():
    """Conv, ReLU, Flatten-as-Reshape(1, -1), Gemm: what torch.onnx.export writes."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1),
    ]
    inits = {
        "w": weights((4, 3, 3, 3)),
        "b": weights((4,), seed=2),
        "shape": np.array([1, -1], dtype=np.int64),
        "fc": weights((5, 4 * 6 * 6), seed=3),
        "fb": weights((5,), seed=4),
    }
    return model(nodes, {"x": [1, 3, 6, 6]}, ["y"], inits)


def _mixing():
    """A reshape that folds the batch into the channels: the batch cannot be relaxed."""
    nodes = [
        helper.make_node("Reshape", ["x", "rows"], ["m"]),
        helper.make_node("MatMul", ["m", "w"], ["p"]),
        helper.make_node("Reshape", ["p", "back"], ["y"]),
    ]
    inits = {
        "rows": np.array([3, 16], dtype=np.int64),
        "w": weights((16, 5)),
        "back": np.array([1, 15], dtype=np.int64),
    }
    return model(nodes, {"x": [1, 3, 4, 4]}, ["y"], inits)


def _per_sample_ort(m, x: np.ndarray) -> np.ndarray:
    return np.concatenate([run_ort(m, {"x": x[k : k + 1]})[0] for k in range(len(x))])


@pytest.mark.parametrize("make", [_relaxable, _mixing], ids=["relaxable", "mixing"])
@pytest.mark.parametrize("samples", [1, 4])
def test_any_number_of_samples_as_onnxruntime_per_sample(make, samples):
    m = make()
    graph = load_onnx(m)
    assert fixed_batch(graph) == 1
    x = np.random.default_rng(samples).normal(size=(samples, *graph.inputs[0].shape[1:]))
    x = x.astype(np.float32)
    got = graph.run_float(x)["y"]
    np.testing.assert_allclose(got, _per_sample_ort(m, x), rtol=1e-5, atol=1e-5)


def test_unrelaxable_batch_runs_one_sample_at_a_time_exactly():
    """Where relax_batch keeps the batch, each sample's result is the one-sample run's, bit for
    bit (the samples go through the model as exported)."""
    graph = load_onnx(_mixing())
    assert fixed_batch(relax_batch(graph)) == 1
    x = np.random.default_rng(0).normal(size=(3, 3, 4, 4)).astype(np.float32)
    got = graph.run_float(x)["y"]
    for k in range(3):
        assert np.array_equal(got[k : k + 1], graph.run_float(x[k : k + 1])["y"])


def test_unrelaxable_intermediates_without_the_batch_refused_by_name():
    """Value 'm' (3x16 per sample) holds no batch axis to stack the samples on."""
    graph = load_onnx(_mixing())
    x = np.zeros((2, 3, 4, 4), np.float32)
    with pytest.raises(InvalidInputError, match=r"value 'm' of shape 3x16 does not carry"):
        graph.run_float(x + np.arange(2, dtype=np.float32)[:, None, None, None], intermediates=True)


def test_relaxed_batch_runs_together():
    graph = load_onnx(_relaxable())
    assert fixed_batch(relax_batch(graph)) is None
    x = np.random.default_rng(1).normal(size=(5, 3, 6, 6)).astype(np.float32)
    everything = graph.run_float(x, intermediates=True)
    assert everything["r"].shape == (5, 4, 6, 6)
    assert everything["y"].shape == (5, 5)


def test_other_shapes_still_refused_naming_the_input():
    graph = load_onnx(_relaxable())
    with pytest.raises(InvalidInputError, match=r"input 'x' has shape 4x3x5x6"):
        graph.run_float(np.zeros((4, 3, 5, 6), np.float32))
