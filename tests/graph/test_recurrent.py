"""LSTM and GRU: imported and run by the float executor, against onnxruntime (every direction,
GRU's linear_before_reset, optional inputs omitted or given, several sequence lengths), against
PyTorch (exported nn.LSTM / nn.GRU), the normalized node, the refusals and the shape errors."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, run_ort, single, weights

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx
from quantemu.graph.onnx_export import to_onnx
from quantemu.graph.summary import node_macs

pytest.importorskip("onnxruntime", reason=ORT_REASON)

RTOL, ATOL = 1e-5, 1e-6
GATES = {"LSTM": 4, "GRU": 3}
BATCH, INPUT, HIDDEN = 3, 5, 7


def _args(op, direction, *, seq=4, bias=True, h0=True, c0=True, batch=BATCH, size=INPUT):
    """Inputs for ``single``: X a graph input, the rest initializers, ``""`` where omitted."""
    dirs, rows = 2 if direction == "bidirectional" else 1, GATES[op] * HIDDEN
    args = [
        (seq, batch, size),
        weights((dirs, rows, size), seed=1, scale=0.6),
        weights((dirs, rows, HIDDEN), seed=2, scale=0.6),
        weights((dirs, 2 * rows), seed=3, scale=0.5) if bias else "",
        "",  # sequence_lens
        weights((dirs, BATCH, HIDDEN), seed=4, scale=0.8) if h0 else "",
    ]
    if op == "LSTM":
        args.append(weights((dirs, BATCH, HIDDEN), seed=5, scale=0.8) if c0 else "")
    while isinstance(args[-1], str):
        args.pop()
    return args


def _single(op, args, *, opset=14, **attrs):
    attrs = {"hidden_size": HIDDEN, **attrs}
    return single(op, args, opset=opset, outputs=3 if op == "LSTM" else 2, **attrs)


def _check(m, feeds):
    return assert_matches_ort(m, feeds, rtol=RTOL, atol=ATOL)


DIRECTIONS = ["forward", "reverse", "bidirectional"]
#: (bias, initial_h, initial_c): all, none, and the omitted inputs that leave holes.
OPTIONAL = [(True, True, True), (False, False, False), (True, False, False), (False, True, True),
            (False, False, True)]  # fmt: skip


@pytest.mark.parametrize("seq", [1, 4, 9])
@pytest.mark.parametrize(("bias", "h0", "c0"), OPTIONAL, ids=["all", "none", "B", "h0c0", "c0"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lstm_matches_ort(direction, bias, h0, c0, seq):
    _check(*_single("LSTM", _args("LSTM", direction, seq=seq, bias=bias, h0=h0, c0=c0),
                    direction=direction))  # fmt: skip


@pytest.mark.parametrize("seq", [1, 4, 9])
@pytest.mark.parametrize(
    ("bias", "h0"), [(True, True), (False, False), (True, False), (False, True)]
)
@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_matches_ort(direction, linear_before_reset, bias, h0, seq):
    args = _args("GRU", direction, seq=seq, bias=bias, h0=h0)
    _check(*_single("GRU", args, direction=direction, linear_before_reset=linear_before_reset))


@pytest.mark.parametrize("opset", [7, 14, 22])
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_every_reviewed_version(op, opset):
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    _check(
        *_single(op, _args(op, "bidirectional"), opset=opset, direction="bidirectional", **extra)
    )


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_symbolic_batch_and_large_inputs(op):
    """A symbolic batch stays symbolic; saturating gates (|pre-activation| >> 1) stay exact."""
    args = _args(op, "bidirectional", seq=6, h0=False, c0=False)
    args[0] = (6, "N", INPUT)
    m, feeds = _single(op, args, direction="bidirectional")
    feeds["in0"] = feeds["in0"] * np.float32(20)
    graph = _check(m, feeds)
    assert graph.tensors["out0"].shape == (6, 2, "N", HIDDEN)
    assert graph.tensors["out1"].shape == (2, "N", HIDDEN)


def test_lstm_batch_of_one_long_sequence():
    args = _args("LSTM", "forward", seq=40, batch=1, h0=False, c0=False)
    _check(*_single("LSTM", args))


# -- the normalized node ------------------------------------------------------------------------


def test_node_keeps_onnx_positions_and_drops_trailing_omissions():
    m, _ = _single("GRU", _args("GRU", "reverse", bias=False), direction="reverse")
    (node,) = load_onnx(m).nodes
    assert node.inputs == ("in0", "in1", "in2", "", "", "in5")
    assert dict(node.attrs) == {"hidden_size": HIDDEN, "direction": "reverse",
                                "linear_before_reset": 0}  # fmt: skip
    m, _ = _single("LSTM", _args("LSTM", "forward", h0=False, c0=False))
    (node,) = load_onnx(m).nodes
    assert node.inputs == ("in0", "in1", "in2", "in3")
    assert dict(node.attrs) == {"hidden_size": HIDDEN, "direction": "forward"}
    assert node.outputs == ("out0", "out1", "out2")


def test_explicit_defaults_zero_peepholes_and_full_sequence_lens_are_accepted():
    """Default activations given explicitly, an all-zero P and a sequence_lens equal to the
    sequence length everywhere change nothing: P and sequence_lens leave the node."""
    seq = 4
    args = _args("LSTM", "bidirectional", seq=seq)
    args[4] = np.full(BATCH, seq, np.int32)
    args.append(np.zeros((2, 3 * HIDDEN), np.float32))  # P
    m, feeds = _single("LSTM", args, direction="bidirectional",
                       activations=["Sigmoid", "Tanh", "Tanh"] * 2)  # fmt: skip
    graph = _check(m, feeds)
    (node,) = graph.nodes
    assert node.inputs == ("in0", "in1", "in2", "in3", "", "in5", "in6")
    assert set(graph.initializers) == {"in1", "in2", "in3", "in5", "in6"}


def test_hidden_size_defaults_to_r():
    m, feeds = _single("GRU", _args("GRU", "forward"))
    expected = run_ort(m, feeds)
    del m.graph.node[0].attribute[:]  # no hidden_size: ONNX's reference takes R's last dim
    graph = load_onnx(m)
    assert graph.nodes[0].attrs["hidden_size"] == HIDDEN
    for got, want in zip(graph.run_float(feeds).values(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_outputs_trailing_unused_dropped_and_omitted_y_named():
    args = _args("LSTM", "forward")
    names = [f"in{i}" if not isinstance(a, str) else "" for i, a in enumerate(args)]
    node = helper.make_node("LSTM", names, ["", "h", "c_unused"], hidden_size=HIDDEN, name="rnn")
    inits = {f"in{i}": a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    m = model([node], {"in0": args[0]}, ["h"], inits, opset=14)
    graph = load_onnx(m)
    assert graph.nodes[0].outputs == ("rnn/Y", "h")
    feeds = {"in0": np.random.default_rng(0).normal(size=args[0]).astype(np.float32)}
    (want,) = run_ort(m, feeds)
    np.testing.assert_allclose(graph.run_float(feeds)["h"], want, rtol=RTOL, atol=ATOL)


def test_macs_per_sample():
    m, _ = _single("LSTM", _args("LSTM", "bidirectional", seq=6), direction="bidirectional")
    graph = load_onnx(m)
    assert node_macs(graph, graph.nodes[0]) == 6 * 2 * 4 * HIDDEN * (INPUT + HIDDEN)


def test_written_back_to_onnx_runs_the_same():
    args = _args("GRU", "bidirectional", bias=False)
    m, feeds = _single("GRU", args, direction="bidirectional", linear_before_reset=1)
    graph = load_onnx(m)
    proto = to_onnx(graph)
    onnx.checker.check_model(proto)
    for got, want in zip(graph.run_float(feeds).values(), run_ort(proto, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# -- PyTorch ------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_torch_export(kind, bidirectional):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cls = getattr(torch.nn, kind)
    net = cls(input_size=16, hidden_size=64, num_layers=2, bidirectional=bidirectional).eval()
    x = torch.randn(9, 3, 16)
    names = ["y", "h", "c"] if kind == "LSTM" else ["y", "h"]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), buf, dynamo=False, input_names=["x"], output_names=names,
                          opset_version=14)  # fmt: skip
    graph = load_onnx(buf.getvalue())
    assert [n.op_type for n in graph.nodes].count(kind) == 2
    with torch.no_grad():
        y, state = net(x)
    want = [y, *(state if kind == "LSTM" else (state,))]
    got = graph.run_float(x.numpy())
    for name, expected in zip(names, want, strict=True):
        np.testing.assert_allclose(got[name], expected.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


# -- refusals -----------------------------------------------------------------------------------


REFUSED = [
    ("LSTM", {"layout": 1}, r"layout 1 .*not supported.*export with layout 0"),
    ("GRU", {"layout": 1}, r"layout 1 .*not supported.*export with layout 0"),
    ("LSTM", {"input_forget": 1}, r"input_forget 1 .*not supported.*input_forget=0"),
    ("LSTM", {"activations": ["Relu", "Tanh", "Tanh"]},
     r"activations \['Relu', 'Tanh', 'Tanh'\] are not supported.*\['Sigmoid', 'Tanh', 'Tanh'\]"),
    ("GRU", {"activations": ["Sigmoid", "Relu"]},
     r"activations \['Sigmoid', 'Relu'\] .*remove the attribute"),
    ("LSTM", {"activation_alpha": [0.5]}, r"activation_alpha \[0\.5\] .*remove the attribute"),
    ("GRU", {"activation_beta": [0.1, 0.2]}, r"activation_beta \[0\.1.*remove the attribute"),
    ("LSTM", {"clip": 3.0}, r"clip 3\.0 .*not supported.*remove the attribute"),
    ("GRU", {"clip": 1.5}, r"clip 1\.5 .*not supported.*remove the attribute"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs", "message"), REFUSED)
def test_refused_attributes(op, attrs, message):
    m, _ = _single(op, _args(op, "forward"), **attrs)
    with pytest.raises(UnsupportedError, match=rf"{op} '{op.lower()}_node': {message}"):
        load_onnx(m)


def test_nondefault_activations_for_bidirectional_need_both_directions():
    m, _ = _single("GRU", _args("GRU", "bidirectional"), direction="bidirectional",
                   activations=["Sigmoid", "Tanh"])  # fmt: skip
    with pytest.raises(UnsupportedError, match=r"\['Sigmoid', 'Tanh', 'Sigmoid', 'Tanh'\]"):
        load_onnx(m)


def test_nonzero_peepholes_refused():
    args = [*_args("LSTM", "forward"), np.full((1, 3 * HIDDEN), 0.25, np.float32)]
    with pytest.raises(UnsupportedError, match=r"peephole weights P 'in7' .*0\.25.*omit P"):
        load_onnx(_single("LSTM", args)[0])


def test_short_sequence_lens_refused():
    args = _args("GRU", "forward", seq=4)
    args[4] = np.array([4, 2, 4], np.int32)
    with pytest.raises(
        UnsupportedError, match=r"sequence_lens \[4, 2, 4\] with seq_length 4.*omit"
    ):
        load_onnx(_single("GRU", args)[0])


def test_computed_sequence_lens_refused():
    args = _args("LSTM", "forward")
    args[4] = (BATCH,)  # a graph input (float here; what matters is that it is not constant)
    with pytest.raises(UnsupportedError, match=r"sequence_lens, 'in4'\) is computed at run time"):
        load_onnx(_single("LSTM", args)[0])


def test_old_versions_refused_naming_both():
    m, _ = _single("LSTM", _args("LSTM", "forward"), opset=6)
    with pytest.raises(UnsupportedError, match=r"LSTM at opset 6 is version 1.*versions 7 to 22"):
        load_onnx(m)


INVALID = [
    ("LSTM", {"direction": "sideways"}, r"direction 'sideways' is not one of forward"),
    ("GRU", {"linear_before_reset": 2}, r"linear_before_reset 2 must be 0 or 1"),
    ("GRU", {"hidden_size": 0}, r"hidden_size 0 must be >= 1"),
]


@pytest.mark.parametrize(("op", "attrs", "message"), INVALID)
def test_invalid_attributes(op, attrs, message):
    with pytest.raises(InvalidInputError, match=message):
        load_onnx(_single(op, _args(op, "forward"), **attrs)[0])


# -- shape errors -------------------------------------------------------------------------------


def _with(args, index, value):
    args = list(args)
    args[index] = value
    return args


SHAPES = [
    ("W", 1, weights((1, 4 * 6, INPUT)), r"W 'in1' has shape \(1, 24, 5\), expected \(1, 28, 5\)"),
    ("W_input", 1, weights((1, 4 * HIDDEN, 3)), r"W 'in1' .*expected \(1, 28, 5\) \(num_dir"),
    ("R", 2, weights((1, 4 * HIDDEN, 6)), r"R 'in2' has shape \(1, 28, 6\), expected \(1, 28, 7\)"),
    ("B", 3, weights((1, 4 * HIDDEN)), r"B 'in3' has shape \(1, 28\), expected \(1, 56\)"),
    ("h0_batch", 5, weights((1, 2, HIDDEN)), r"initial_h 'in5' .*\(1, 2, 7\), expected \(1, 3,"),
    ("c0_dirs", 6, weights((2, BATCH, HIDDEN)), r"initial_c 'in6' .*expected \(1, 3, 7\)"),
    ("X_rank", 0, (BATCH, INPUT), r"X 'in0' has shape \(3, 5\), expected rank 3"),
]  # fmt: skip


@pytest.mark.parametrize(("index", "value", "message"), [s[1:] for s in SHAPES],
                         ids=[s[0] for s in SHAPES])  # fmt: skip
def test_shape_errors_name_shapes(index, value, message):
    m, _ = _single("LSTM", _with(_args("LSTM", "forward"), index, value))
    with pytest.raises(InvalidInputError, match=rf"LSTM 'lstm_node': {message}"):
        load_onnx(m)


def test_bidirectional_weights_need_two_directions():
    m, _ = _single("GRU", _args("GRU", "forward"), direction="bidirectional")
    with pytest.raises(InvalidInputError, match=r"W 'in1' .*expected \(2, 21, 5\).*bidirectional"):
        load_onnx(m)
