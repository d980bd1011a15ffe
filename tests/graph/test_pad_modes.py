"""ONNX Pad with modes reflect and edge (opsets 2 to 25): the float executor against
onnxruntime, and the targets that cannot run it refusing with the mode named."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_models import ORT_REASON, assert_matches_ort, single

import quantemu
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx

PADS = [0, 0, 1, 2, 0, 0, 3, 1]  # H: (1, 3), W: (2, 1)


def _pad_model(mode: str, opset: int, pads=PADS, shape=(2, 3, 5, 4), axes=None):
    if opset < 11:
        return single("Pad", [shape], opset=opset, mode=mode, pads=list(pads))
    args = [shape, np.array(pads, dtype=np.int64)]
    if axes is not None:
        args += ["", np.array(axes, dtype=np.int64)]
    return single("Pad", args, opset=opset, mode=mode)


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("opset", [2, 11, 13, 18, 21, 25])
def test_border_modes_match_onnxruntime(mode, opset):
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    assert_matches_ort(*_pad_model(mode, opset), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_opset18_axes_match_onnxruntime(mode):
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    assert_matches_ort(*_pad_model(mode, 18, pads=[2, 1, 0, 3], axes=[-1, 2]), rtol=0, atol=0)


def test_border_modes_are_their_own_operator():
    graph = load_onnx(_pad_model("reflect", 13)[0])
    (node,) = graph.nodes
    assert (node.op_type, dict(node.attrs)) == (
        "BorderPad",
        {"pads": tuple(PADS), "mode": "reflect"},
    )


def test_reflect_wider_than_the_axis_refused():
    """onnxruntime refuses it; NumPy would reflect twice. Axis 3 has 4 columns: at most 3."""
    with pytest.raises(InvalidInputError, match=r"reflect' pads axis 3 of size 4 by \(4, 0\)"):
        load_onnx(_pad_model("reflect", 13, pads=[0, 0, 0, 4, 0, 0, 0, 0])[0])


def test_wrap_refused_naming_the_mode():
    with pytest.raises(UnsupportedError, match=r"mode 'wrap' is not supported"):
        load_onnx(_pad_model("wrap", 19)[0])


def _conv_pad_conv(mode: str):
    from onnx import helper
    from onnx_models import model, weights

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Pad", ["a", "pads"], ["p"], mode=mode),
        helper.make_node("Conv", ["p", "w2"], ["y"]),
    ]
    inits = {
        "w1": weights((4, 3, 3, 3)),
        "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "w2": weights((2, 4, 3, 3), seed=2),
    }
    return load_onnx(model(nodes, {"x": ["N", 3, 6, 6]}, ["y"], inits))


@pytest.mark.parametrize("backend", ["nvdla", "nnie"])
def test_targets_without_border_padding_refuse_naming_the_mode(backend):
    graph = _conv_pad_conv("edge")
    calib = np.random.default_rng(0).normal(size=(4, 3, 6, 6)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"mode 'reflect' or 'edge'"):
        quantemu.compile(graph, backend, calib)


@pytest.mark.parametrize("backend", ["tflite", "xs3"])
def test_tflite_targets_do_not_pad_a_border_mode_with_a_constant(backend):
    """tflite's PAD rule knows the constant Pad only: a border mode is refused with the
    converter's reason (MIRROR_PAD, not emulated yet), never padded with the constant."""
    graph = _conv_pad_conv("reflect")
    calib = np.random.default_rng(0).normal(size=(4, 3, 6, 6)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"BorderPad.*MIRROR_PAD"):
        quantemu.compile(graph, backend, calib)
