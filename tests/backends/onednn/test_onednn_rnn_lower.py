"""ONNX LSTM/GRU through the onednn lowering: bit for bit against the scalar reference fed with
weights converted here independently, the per-step SQNR, the fallbacks and other backends'
refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.onednn import Isa, RnnDirection, RnnParams
from quantemu.backends.onednn import reference_rnn as ref
from quantemu.backends.onednn.rnn import quantize_state
from quantemu.backends.onednn.rnn_params import RnnCell
from quantemu.errors import UnsupportedError

F = np.float32
ONNX_ORDER = {"LSTM": "iofc", "GRU": "zrh"}
ONEDNN_ORDER = {"LSTM": "ifco", "GRU": "zrh"}  # oneDNN's i, f, c~, o and u(=z), r, c~


def recurrent_model(op: str, *, t=4, n=2, i=3, h=4, direction="bidirectional", lbr=0, seed=0):
    """X (N, T, I) -> Transpose -> op -> Y (T, D, N, H), with B and a constant initial_h."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = len(ONNX_ORDER[op])
    inits = {
        "W": rng.normal(0, 0.5, (d, g * h, i)).astype(F),
        "R": rng.normal(0, 0.5, (d, g * h, h)).astype(F),
        "B": rng.normal(0, 0.2, (d, 2 * g * h)).astype(F),
        "h0": np.broadcast_to(rng.uniform(-0.5, 0.5, (d, 1, h)), (d, n, h)).astype(F),
    }
    attrs = {"hidden_size": h, "direction": direction}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        helper.make_node(op, ["xt", "W", "R", "B", "", "h0"], ["y"], name="rnn", **attrs),
    ]
    graph = helper.make_graph(
        nodes,
        "rnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, t, i])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [t, d, n, h])],
        [numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return quantemu.load_onnx(model.SerializeToString()), inits


def _onednn_weights(op: str, inits: dict, per_channel: bool):
    """ldigo weights, scales and bias, converted element by element."""
    w, r, b = inits["W"], inits["R"], inits["B"]
    d, gh, i = w.shape
    g, h = len(ONNX_ORDER[op]), gh // len(ONNX_ORDER[op])
    rows = [ONNX_ORDER[op].index(gate) * h for gate in ONEDNN_ORDER[op]]
    wl = np.zeros((1, d, i, g, h), F)
    wi = np.zeros((1, d, h, g, h), F)
    bias = np.zeros((1, d, g, h), F)
    scales = np.zeros(g * h, F)
    for gate, row in enumerate(rows):
        for o in range(h):
            wl[0, :, :, gate, o] = w[:, row + o, :]
            wi[0, :, :, gate, o] = r[:, row + o, :]
            bias[0, :, gate, o] = b[:, row + o] + b[:, gh + row + o]
            w_max = max(np.abs(w[:, row + o, :]).max(), np.abs(r[:, row + o, :]).max())
            scales[gate * h + o] = F(63) / F(w_max)
    if not per_channel:
        scales = np.array([F(63) / max(np.abs(w).max(), np.abs(r).max())], F)
    per_gate = scales.reshape(1, 1, 1, g, h) if per_channel else scales
    q = [np.clip(np.rint(v * per_gate), -128, 127).astype(np.int8) for v in (wl, wi)]
    return q[0], q[1], scales, bias


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("isa", ["avx2", "avx512_core_vnni"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("weights", ["per_tensor", "per_channel"])
def test_lowered_rnn_matches_the_scalar_reference(op, isa, direction, weights):
    graph, inits = recurrent_model(op, direction=direction)
    x = np.random.default_rng(1).normal(0, 0.6, (2, 4, 3)).astype(F)
    prog = quantemu.compile(graph, "onednn", x, isa=isa, rnn_weights=weights)
    run = prog.run(x, keep="all")
    layer = next(lay for lay in prog.lowered.layers if lay.output == "y")
    per_channel = weights == "per_channel"
    params = RnnParams(Isa(isa), layer.params.direction, 127.0, 128.0, 24 if per_channel else 0)
    assert layer.exact and layer.step_axis == 0
    xt = run.tensors["xt"]
    x_u8 = quantize_state(xt.encoding.dequantize(xt.codes), params)[0]
    wl, wi, scales, bias = _onednn_weights(op, inits, per_channel)
    h0 = quantize_state(inits["h0"][None], params)[0]
    cell = RnnCell.LSTM if op == "LSTM" else RnnCell.GRU
    c0 = np.zeros(h0.shape, F)
    dst, _, _ = ref.rnn(cell, params, x_u8.tolist(), (h0.tolist(), c0), (wl, wi, scales, bias))
    d = params.direction.directions
    want = np.array(dst, np.uint8).reshape(4, 2, d, 4).transpose(0, 2, 1, 3)
    assert run.tensors["y"].codes.tolist() == want.tolist()
    if direction == "bidirectional":
        assert params.direction is RnnDirection.CONCAT


def test_the_report_has_the_error_of_every_time_step():
    graph, _ = recurrent_model("LSTM", t=6, n=16, direction="forward")
    x = np.random.default_rng(2).normal(0, 0.5, (16, 6, 3)).astype(F)
    prog = quantemu.compile(graph, "onednn", x, isa="avx2", rnn_data="calibrated")
    ev = prog.evaluate(x)
    stats = next(s for s in ev.layers if s.name == "rnn")
    assert len(stats.step_sqnr_db) == 6 and min(stats.step_sqnr_db) > 15
    assert {"pair_saturated", "state_saturated", "input_saturated"} <= set(stats.counters)
    assert all(not s.step_sqnr_db for s in ev.layers if s.name != "rnn")
    assert "oneDNN 3.2.0" in prog.header["rnn"] and "calibrated" in prog.header["rnn"]


def test_seed_qparams_saturate_inputs_outside_minus_one_to_one():
    graph, _ = recurrent_model("GRU", direction="forward")
    x = np.full((2, 4, 3), 3.0, F)
    seed = quantemu.compile(graph, "onednn", x).evaluate(x)
    stats = next(s for s in seed.layers if s.name == "rnn")
    assert stats.counters["input_saturated"] == x.size


def test_linear_before_reset_falls_back_or_is_refused():
    graph, _ = recurrent_model("GRU", lbr=1)
    x = np.random.default_rng(3).normal(0, 0.5, (2, 4, 3)).astype(F)
    prog = quantemu.compile(graph, "onednn", x)
    layer = next(lay for lay in prog.lowered.layers if lay.output == "y")
    assert not layer.exact and "dnnl_unimplemented" in layer.note
    with pytest.raises(UnsupportedError, match="linear_before_reset"):
        quantemu.compile(graph, "onednn", x, fallback="error")


@pytest.mark.parametrize("backend", ["xs3", "nvdla", "nnie", "tflite"])
def test_other_backends_refuse_recurrent_layers_with_the_reason(backend):
    graph, _ = recurrent_model("LSTM")
    x = np.random.default_rng(4).normal(0, 0.5, (2, 4, 3)).astype(F)
    with pytest.raises(UnsupportedError, match="LSTM") as caught:
        quantemu.compile(graph, backend, x)
    assert any(w in str(caught.value) for w in ("toolchain", "compiler", "mapper", "converter"))


def test_pytorch_lstm_runs_end_to_end_through_the_cli(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from quantemu.cli import main

    torch.manual_seed(0)

    class Speech(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)
            self.fc = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])

    path = tmp_path / "speech.onnx"
    torch.onnx.export(Speech().eval(), torch.randn(1, 10, 8) * 0.5, str(path), dynamo=False,
                      input_names=["x"], output_names=["y"], opset_version=14)  # fmt: skip
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(5).normal(0, 0.5, (8, 10, 8)).astype(F))
    for isa in ("avx2", "avx512_core_vnni"):
        assert (
            main(["run", str(path), "--backend", "onednn", "--isa", isa, "--calib", str(data)]) == 0
        )
        out = capsys.readouterr().out
        assert "per time step" in out and "pair_saturated" in out
    assert onnx.load(str(path)).graph.node
