"""LayerNormalization, Erf, Gelu, Sqrt, Pow, Reciprocal, Squeeze, Unsqueeze and Pad: imported and
run by the float executor, against onnxruntime (one-node models, every attribute/input form)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_models import ORT_REASON, assert_matches_ort, single, weights

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx

pytest.importorskip("onnxruntime", reason=ORT_REASON)

W = weights


def _i64(*values):
    return np.array(values, dtype=np.int64)


def _f32(*values):
    return np.array(values, dtype=np.float32)


LAYER_NORM = [
    ("last_axis", [(2, 5, 16), W((16,)), W((16,), seed=2)], {}),
    ("no_bias", [(2, 5, 16), W((16,))], {}),
    ("axis1_eps", [(2, 3, 4, 5), W((3, 4, 5)), W((3, 4, 5), seed=3)], {"axis": 1, "epsilon": 0.1}),
    ("negative_axis", [(3, 4, 6), W((4, 6))], {"axis": -2}),
    ("broadcast_scale", [(2, 3, 8), W((1, 8)), W((8,))], {"stash_type": 1}),
    ("symbolic_batch", [("N", 7, 12), W((12,)), W((12,))], {}),
]


@pytest.mark.parametrize("opset", [17, 21])
@pytest.mark.parametrize(
    ("args", "attrs"), [c[1:] for c in LAYER_NORM], ids=[c[0] for c in LAYER_NORM]
)
def test_layer_norm(args, attrs, opset):
    assert_matches_ort(*single("LayerNormalization", args, opset=opset, **attrs))


def test_layer_norm_large_offset():
    """A large mean over a small spread: float64 statistics keep the result accurate."""
    m, feeds = single("LayerNormalization", [(4, 64), W((64,))], opset=17)
    feeds["in0"] = feeds["in0"] * np.float32(0.01) + np.float32(100)
    assert_matches_ort(m, feeds, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("opset", [13, 17, 21])
@pytest.mark.parametrize("op", ["Erf", "Sqrt", "Reciprocal"])
def test_unary_math(op, opset):
    m, feeds = single(op, [(2, 3, 9, 11)], opset=opset)
    x = feeds["in0"] * np.float32(3)
    if op == "Sqrt":
        x = np.abs(x)
    elif op == "Reciprocal":
        x = np.where(np.abs(x) < 0.1, np.float32(0.5), x)
    feeds["in0"] = x.astype(np.float32)
    assert_matches_ort(m, feeds)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    m, feeds = single("Gelu", [(2, 7, 33)], opset=20, approximate=approximate)
    feeds["in0"] = feeds["in0"] * np.float32(4)
    assert_matches_ort(m, feeds)


def test_gelu_default_opset21():
    assert_matches_ort(*single("Gelu", [(3, 10)], opset=21))


POW = [
    ("square", [(2, 3, 8), _f32(2.0)]),
    ("sqrt", [(2, 3, 8), _f32(0.5)]),
    ("cube_int", [(2, 3, 8), np.array(3, dtype=np.int64)]),
    ("per_channel", [(2, 3, 8), _f32(1.0, 2.0, 3.0, 0.5, -1.0, 2.0, 1.5, 4.0)]),
    ("runtime_exponent", [(2, 3, 8), (2, 3, 8)]),
]


@pytest.mark.parametrize("args", [c[1] for c in POW], ids=[c[0] for c in POW])
def test_pow(args):
    m, feeds = single("Pow", args, opset=15)
    for name in feeds:
        feeds[name] = np.abs(feeds[name]) + np.float32(0.1)
    assert_matches_ort(m, feeds)


SQUEEZE = [
    ("one_axis", (2, 1, 5), [1]),
    ("negative_axes", (1, 3, 1, 4), [-2, 0]),
    ("all_ones", (1, 3, 1, 1), None),
    ("symbolic_batch", ("N", 8, 1, 1), [2, 3]),
]


@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize(("shape", "axes"), [c[1:] for c in SQUEEZE], ids=[c[0] for c in SQUEEZE])
def test_squeeze(shape, axes, opset):
    if axes is None:
        args, attrs = [shape], {}
    elif opset < 13:
        args, attrs = [shape], {"axes": axes}
    else:
        args, attrs = [shape, _i64(*axes)], {}
    graph = assert_matches_ort(*single("Squeeze", args, opset=opset, **attrs))
    assert graph.nodes[0].inputs == ("in0",)


UNSQUEEZE = [
    ("front", (3, 4), [0]),
    ("several_negative", (3, 4), [-1, 1]),
    ("middle", ("N", 5, 6), [2]),
]


@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize(
    ("shape", "axes"), [c[1:] for c in UNSQUEEZE], ids=[c[0] for c in UNSQUEEZE]
)
def test_unsqueeze(shape, axes, opset):
    if opset < 13:
        args, attrs = [shape], {"axes": axes}
    else:
        args, attrs = [shape, _i64(*axes)], {}
    graph = assert_matches_ort(*single("Unsqueeze", args, opset=opset, **attrs))
    assert graph.nodes[0].attrs["axes"] == tuple(sorted(a % (len(shape) + len(axes)) for a in axes))


X = (2, 3, 5, 4)


@pytest.mark.parametrize(
    ("opset", "args", "attrs"),
    [
        (9, [X], {"pads": [0, 0, 1, 2, 0, 0, 2, 1]}),
        (9, [X], {"pads": [0, 1, 1, 0, 0, 0, 0, 3], "value": 1.5}),
        (11, [X, _i64(0, 0, 1, 1, 0, 0, 1, 1)], {}),
        (13, [X, _i64(0, 0, 2, 0, 0, 0, 0, 1), _f32(-0.75)], {"mode": "constant"}),
        (18, [X, _i64(1, 2, 3, 0), _f32(2.0), _i64(2, -1)], {}),
        (21, [X, _i64(0, 0, 1, 1, 0, 0, 1, 1), ""], {}),
    ],
    ids=["attr", "attr_value", "input", "input_value", "axes", "omitted_value"],
)
def test_pad(opset, args, attrs):
    graph = assert_matches_ort(*single("Pad", args, opset=opset, **attrs))
    node = graph.nodes[0]
    assert node.inputs == ("in0",)
    assert node.attrs["mode"] == "constant"
    assert len(node.attrs["pads"]) == 8


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_border_modes_import_as_border_pad(mode):
    # reflect and edge copy border values: their own IR op, so that no backend pads them with
    # a constant (tests/graph/test_pad_modes.py checks them against onnxruntime)
    m, _ = single("Pad", [X, _i64(0, 0, 1, 1, 0, 0, 1, 1)], opset=13, mode=mode)
    (node,) = load_onnx(m).nodes
    assert (node.op_type, node.attrs["mode"]) == ("BorderPad", mode)


def test_refusals_name_the_problem():
    m, _ = single("Pad", [X, _i64(0, 0, -1, 0, 0, 0, 0, 0)], opset=13)
    with pytest.raises(UnsupportedError, match="negative pads"):
        load_onnx(m)
    m, _ = single("Pad", [X, (8,)], opset=13)
    with pytest.raises(UnsupportedError, match=r"pads.*computed at run time"):
        load_onnx(m)
    m, _ = single("Gelu", [X], opset=20, approximate="fast")
    with pytest.raises(UnsupportedError, match="approximate 'fast'"):
        load_onnx(m)
    m, _ = single("LayerNormalization", [X, W((4,))], opset=17, stash_type=10)
    with pytest.raises(UnsupportedError, match="stash_type 10"):
        load_onnx(m)
    m, _ = single("Squeeze", [X, _i64(1)], opset=13)
    with pytest.raises(InvalidInputError, match="cannot squeeze axes"):
        load_onnx(m)
    m, _ = single("Squeeze", [("N", 3, 1)], opset=13)
    with pytest.raises(UnsupportedError, match="known input shape"):
        load_onnx(m)
    m, _ = single("Unsqueeze", [X, (1,)], opset=13)
    with pytest.raises(UnsupportedError, match=r"axes.*computed at run time"):
        load_onnx(m)


def test_layer_norm_mean_and_inv_std_dev_outputs():
    m, feeds = single("LayerNormalization", [(2, 3, 8), W((3, 8))], opset=17, outputs=3, axis=1)
    graph = assert_matches_ort(m, feeds)
    assert graph.tensors["out1"].shape == (2, 1, 1)
