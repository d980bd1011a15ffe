"""Gather, Slice, Split, Expand, Where and shape sub-graphs: imported and run by the float
executor, against onnxruntime (every attribute/input form), and the refusals name the node."""

from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, assert_matches_ort, model, single

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx

pytest.importorskip("onnxruntime", reason=ORT_REASON)

N = helper.make_node
BIG = np.iinfo(np.int64).max


def _i64(*values):
    return np.array(values, dtype=np.int64)


GATHER = [
    ("axis0_scalar", [(5, 3, 4), np.array(2, np.int64)], {}),
    ("axis1_vector", [(2, 5, 4), _i64(4, 0, 0, 1)], {"axis": 1}),
    ("last_axis_negative", [(2, 3, 6), _i64(-1, -6, 2)], {"axis": -1}),
    ("matrix_indices", [(2, 7, 3), np.array([[0, 6], [-2, 3]], np.int64)], {"axis": 1}),
    ("symbolic_batch_other_axis", [("N", 6, 3), _i64(5, -1)], {"axis": 1}),
]


@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize(("args", "attrs"), [c[1:] for c in GATHER], ids=[c[0] for c in GATHER])
def test_gather(args, attrs, opset):
    graph = assert_matches_ort(*single("Gather", args, opset=opset, **attrs))
    assert min(graph.nodes[0].attrs["indices"]) >= 0  # negative indices normalized


def test_gather_on_symbolic_batch_is_refused():
    m, _ = single("Gather", [("N", 3), _i64(0)], opset=13)
    with pytest.raises(UnsupportedError, match=r"gather_node.*batch axis"):
        load_onnx(m)


def test_gather_indices_out_of_range():
    m, _ = single("Gather", [(2, 3), _i64(3)], opset=13, axis=1)
    with pytest.raises(InvalidInputError, match=r"indices \[3\]"):
        load_onnx(m)


SLICE = [
    ("simple", [(6, 8), _i64(1, 2), _i64(5, 7)]),
    ("axes_steps", [(2, 9, 10), _i64(1, 8), _i64(8, 1), _i64(1, -1), _i64(1, -2)]),
    ("negative_bounds", [(3, 10), _i64(-7), _i64(-1), _i64(-1)]),
    ("open_end", [(3, 10), _i64(2), _i64(BIG), _i64(1), _i64(3)]),
    ("reverse_all", [(4, 5), _i64(-1), _i64(-BIG), _i64(1), _i64(-1)]),
    ("clamped", [(4, 5), _i64(-100, 1), _i64(100, 3)]),
    ("empty", [(4, 5), _i64(3), _i64(1), _i64(1)]),
    ("symbolic_batch_full", [("N", 6, 4), _i64(0, 1), _i64(BIG, 5), _i64(0, 2)]),
]


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("args", [c[1] for c in SLICE], ids=[c[0] for c in SLICE])
def test_slice(args, opset):
    assert_matches_ort(*single("Slice", args, opset=opset))


def test_slice_opset9_attributes():
    m, feeds = single("Slice", [(4, 6, 5)], opset=9, starts=[1, -4], ends=[3, 100], axes=[0, 2])
    assert_matches_ort(m, feeds)


def test_slice_of_symbolic_batch_is_refused():
    m, _ = single("Slice", [("N", 4), _i64(1), _i64(2), _i64(0)], opset=13)
    with pytest.raises(UnsupportedError, match=r"slice_node.*batch axis"):
        load_onnx(m)


SPLIT = [
    ("even_default", 13, [(6, 4)], 3, {}),
    ("sizes_input", 13, [(2, 9), _i64(2, 3, 4)], 3, {"axis": 1}),
    ("sizes_attribute", 11, [(2, 3, 7)], 2, {"axis": -1, "split": [5, 2]}),
    ("num_outputs_uneven", 18, [(2, 7)], 3, {"axis": 1, "num_outputs": 3}),
    ("symbolic_batch_other_axis", 18, [("N", 8)], 2, {"axis": 1, "num_outputs": 2}),
]


@pytest.mark.parametrize(
    ("opset", "args", "outputs", "attrs"), [c[1:] for c in SPLIT], ids=[c[0] for c in SPLIT]
)
def test_split(opset, args, outputs, attrs):
    graph = assert_matches_ort(*single("Split", args, opset=opset, outputs=outputs, **attrs))
    assert {n.op_type for n in graph.nodes} == {"Slice"}
    assert len(graph.nodes) == outputs


EXPAND = [
    ("new_axes", [(3, 1), _i64(2, 3, 4)]),
    ("bidirectional", [(2, 1, 5), _i64(3, 1)]),
    ("same", [(2, 3), _i64(2, 3)]),
]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("args", [c[1] for c in EXPAND], ids=[c[0] for c in EXPAND])
def test_expand(args, opset):
    assert_matches_ort(*single("Expand", args, opset=opset))


def test_where_constant_condition():
    cond = np.random.default_rng(3).random((3, 1, 5)) > 0.5
    fill = np.array(-1e4, np.float32)
    assert_matches_ort(*single("Where", [cond, (2, 3, 4, 5), fill], opset=16))
    assert_matches_ort(*single("Where", [cond, fill, (3, 4, 1)], opset=9))


def test_where_runtime_condition_is_refused():
    m = model(
        [N("Greater", ["x", "y"], ["c"], name="cmp"), N("Where", ["c", "x", "y"], ["o"], name="w")],
        {"x": (2, 3), "y": (2, 3)},
        ["o"],
        opset=13,
    )
    where = load_onnx(m, strict=False).nodes[1]
    assert where.attrs["onnx_op"] == "Where"
    assert "constant (initializer) condition" in where.attrs["reason"]


# -- shape sub-graphs ---------------------------------------------------------------------------


def _shape_chain(x_shape, tail, opset=13):
    """Shape -> Gather(0) -> Unsqueeze -> Concat with ``tail`` -> Reshape (view(b, ...))."""
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Gather", ["s", "zero"], ["b"], axis=0),
        N("Unsqueeze", ["b", "ax0"], ["b1"]),
        N("Concat", ["b1", "tail"], ["target"], axis=0),
        N("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    inits = {"zero": np.array(0, np.int64), "ax0": _i64(0), "tail": np.asarray(tail, np.int64)}
    return model(nodes, {"x": x_shape}, ["y"], inits, opset)


@pytest.mark.parametrize("x_shape", [(2, 3, 4), ("N", 3, 4)])
def test_shape_chain_folds_to_reshape(x_shape):
    m = _shape_chain(x_shape, [-1])
    feeds = {"x": np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)}
    graph = assert_matches_ort(m, feeds)
    assert [n.op_type for n in graph.nodes] == ["Reshape"]
    assert graph.nodes[0].attrs["shape"] == ((2, -1) if x_shape[0] == 2 else (0, -1))


def test_shape_chain_minus_one_when_provable():
    """(N, 3, 4) -> Reshape to (12, N): the batch entry is not at the batch position."""
    nodes = [
        N("Shape", ["x"], ["s"], start=0, end=1),
        N("Concat", ["twelve", "s"], ["target"], axis=0),
        N("Reshape", ["x", "target"], ["y"]),
    ]
    m = model(nodes, {"x": ("N", 3, 4)}, ["y"], {"twelve": _i64(12)}, opset=15)
    feeds = {"x": np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)}
    graph = assert_matches_ort(m, feeds)
    assert graph.nodes[0].attrs["shape"] == (12, -1)


def test_shape_chain_unprovable_is_refused():
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Slice", ["s", "zero", "one"], ["b"]),
        N("Mul", ["b", "three"], ["b3"]),
        N("Concat", ["b3", "four"], ["target"], axis=0),
        N("Reshape", ["x", "target"], ["y"], name="flat"),
    ]
    inits = {"zero": _i64(0), "one": _i64(1), "three": _i64(3), "four": _i64(4)}
    m = model(nodes, {"x": ("N", 3, 4)}, ["y"], inits, opset=13)
    with pytest.raises(UnsupportedError, match=r"Reshape 'flat'.*'N'"):
        load_onnx(m)


def test_size_and_constant_of_shape_fold():
    value = helper.make_tensor("v", 1, [1], [0.5])
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("ConstantOfShape", ["s"], ["half"], value=value),
        N("Size", ["x"], ["n"]),
        N("Cast", ["n"], ["nf"], to=1),
        N("Mul", ["x", "half"], ["xh"]),
        N("Div", ["xh", "nf"], ["y"]),
    ]
    m = model(nodes, {"x": (2, 3)}, ["y"], {}, opset=13)
    feeds = {"x": np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)}
    graph = assert_matches_ort(m, feeds)
    assert [n.op_type for n in graph.nodes] == ["Mul", "Div"]


def test_symbolic_shape_into_other_ops_is_refused():
    nodes = [N("Shape", ["x"], ["s"]), N("Expand", ["x", "s"], ["y"], name="grow")]
    m = model(nodes, {"x": ("N", 3)}, ["y"], {}, opset=13)
    with pytest.raises(UnsupportedError, match=r"Expand 'grow'.*symbolic dimension 'N'"):
        load_onnx(m)


@pytest.mark.filterwarnings("ignore")
def test_torch_view_and_split_heads_symbolic_batch():
    """What the TorchScript exporter writes for x.shape-driven reshapes with a dynamic batch:
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains fold to 0 (copy the batch)."""
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")

    class Net(torch.nn.Module):
        def forward(self, x):
            b, t, c = x.shape
            q, k = x.split(c // 2, dim=-1)
            h = (q * k[:, :1]).reshape(b, t, 2, c // 4).transpose(1, 2)
            return h[:, 1, 1:].reshape(b, -1)

    buf = io.BytesIO()
    x = torch.randn(2, 5, 8)
    torch.onnx.export(Net(), (x,), buf, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "N"}}, opset_version=13)  # fmt: skip
    graph = assert_matches_ort(onnx.load_from_string(buf.getvalue()), {"x": x.numpy()})
    reshapes = [n.attrs["shape"] for n in graph.nodes if n.op_type == "Reshape"]
    assert reshapes == [(0, 5, 2, 2), (0, -1)]
    assert "Shape" not in {n.op_type for n in graph.nodes}
