"""PyTorch's run-time zero h0/c0 of LSTM/GRU (dynamic batch) are dropped at import: an absent
initial state is zeros by the operator's definition; a non-zero one is kept."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu

F = np.float32


def _export(tmp_path, cell: str):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Sequence(torch.nn.Module):  # the output sequence only, as a model would use it
        def __init__(self):
            super().__init__()
            self.rnn = getattr(torch.nn, cell)(8, 12, num_layers=2, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    rnn = Sequence().eval()
    path = tmp_path / f"{cell}.onnx"
    torch.onnx.export(rnn, torch.randn(2, 5, 8), str(path), dynamo=False, input_names=["x"],
                      output_names=["y"], opset_version=14,
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})  # fmt: skip
    return torch, rnn, path


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_a_dynamic_batch_pytorch_export_imports_and_matches_torch(tmp_path, cell):
    torch, rnn, path = _export(tmp_path, cell)
    graph = quantemu.load_onnx(str(path))
    assert not any(n.op_type in ("ConstantOfShape", "Slice") for n in graph.nodes)
    assert all(len(n.inputs) <= 5 for n in graph.nodes if n.op_type == cell)  # no h0/c0
    x = np.random.default_rng(0).normal(0, 1, (7, 5, 8)).astype(F)  # another batch size
    want = rnn(torch.from_numpy(x)).detach().numpy()
    got = graph.run_float({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_lstm_export_runs_on_onednn_at_any_batch(tmp_path):
    _, _, path = _export(tmp_path, "LSTM")
    x = np.random.default_rng(1).normal(0, 0.5, (9, 5, 8)).astype(F)
    prog = quantemu.compile(str(path), "onednn", calib=x)
    assert prog.run(x).outputs["y"].shape == (9, 5, 12)


def _lstm_with_state(value: float):
    """X (T, N, I) with initial_h = Slice(ConstantOfShape(value)) over a shape from X."""
    shape = numpy_helper.from_array(np.array([1, 2, 3], np.int64), "shape")
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n)
                    for v, n in ((0, "s"), (1, "e")))  # fmt: skip
    w = numpy_helper.from_array(np.ones((1, 12, 4), F), "W")
    r = numpy_helper.from_array(np.ones((1, 12, 3), F), "R")
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [value])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"], value=fill),
        helper.make_node("Slice", ["zeros", "s", "e"], ["h0"]),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0"], ["y"], hidden_size=3),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 2, 3])],
        [shape, starts, ends, w, r],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return quantemu.load_onnx(model.SerializeToString())


def test_only_zero_states_are_dropped():
    dropped = _lstm_with_state(0.0)
    assert [n.op_type for n in dropped.nodes] == ["LSTM"]
    kept = _lstm_with_state(0.5)
    lstm = next(n for n in kept.nodes if n.op_type == "LSTM")
    assert len(lstm.inputs) == 6 and lstm.inputs[5]  # the non-zero initial_h stays
