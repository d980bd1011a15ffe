"""ONNX Resize in linear mode (bilinear over H and W) against onnxruntime, value for value:
the float kernel follows onnxruntime's UpsampleBilinear in float32, so the outputs are equal,
not close."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import ORT_REASON, model, run_ort

from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx

pytest.importorskip("onnxruntime", reason=ORT_REASON)

X = (2, 3, 7, 9)
MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
SCALES = [(1, 1, 2, 2), (1, 1, 1.7, 0.6), (1, 1, 0.5, 3), (1, 1, 1, 2.5), (1, 1, 3, 1)]
SIZES = [(2, 3, 14, 18), (2, 3, 1, 5), (2, 3, 4, 1), (2, 3, 11, 4), (2, 3, 7, 13)]


def _resize(opset: int, scales=None, sizes=None, **attrs):
    inits = {"roi": np.zeros(0, np.float32)}
    inputs = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        inputs.append("scales")
    else:
        inits["sizes"] = np.array(sizes, np.int64)
        inputs += ["", "sizes"]
    node = helper.make_node("Resize", inputs, ["y"], mode="linear", **attrs)
    return model([node], {"x": X}, ["y"], inits, opset=opset)


def _assert_equal_to_ort(m, seed=0):
    x = np.random.default_rng(seed).normal(size=X).astype(np.float32) * 10
    want = run_ort(m, {"x": x})[0]
    graph = load_onnx(m)
    got = graph.run_float({"x": x})["y"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert graph.tensors["y"].shape == want.shape
    return graph


@pytest.mark.parametrize("coord", MODES)
@pytest.mark.parametrize("scales", SCALES, ids=str)
@pytest.mark.parametrize("opset", [11, 13, 19])
def test_linear_scales_equal_ort(coord, scales, opset):
    graph = _assert_equal_to_ort(
        _resize(opset, scales=scales, coordinate_transformation_mode=coord)
    )
    (node,) = graph.nodes
    assert node.attrs["mode"] == "linear" and node.attrs["coordinate_transformation_mode"] == coord


@pytest.mark.parametrize("coord", MODES)
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_linear_sizes_equal_ort(coord, sizes):
    _assert_equal_to_ort(_resize(13, sizes=sizes, coordinate_transformation_mode=coord), seed=1)


def test_legacy_linear_is_asymmetric():
    """Upsample-9 and Resize-10 in linear mode: asymmetric coordinates."""
    for op, opset in (("Upsample", 9), ("Resize", 10)):
        node = helper.make_node(op, ["x", "scales"], ["y"], mode="linear")
        inits = {"scales": np.array([1, 1, 2.5, 1.5], np.float32)}
        graph = _assert_equal_to_ort(model([node], {"x": X}, ["y"], inits, opset=opset))
        assert graph.nodes[0].attrs["coordinate_transformation_mode"] == "asymmetric"


@pytest.mark.parametrize(
    ("attrs", "scales", "match"),
    [
        ({"mode": "cubic"}, (1, 1, 2, 2), "mode 'cubic' is not supported"),
        ({"antialias": 1}, (1, 1, 0.5, 0.5), "antialias=1"),
        ({"coordinate_transformation_mode": "tf_crop_and_resize"}, (1, 1, 2, 2), "linear mode"),
        ({"coordinate_transformation_mode": "half_pixel_symmetric"}, (1, 1, 2, 2), "linear"),
        ({}, (1, 2, 2, 2), "N and C unchanged"),
    ],
)
def test_linear_refusals_name_the_value(attrs, scales, match):
    attrs = {"mode": "linear", **attrs}
    mode = attrs.pop("mode")
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array(scales, np.float32)}
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode, **attrs)
    with pytest.raises(UnsupportedError, match=match):
        load_onnx(model([node], {"x": X}, ["y"], inits, opset=19))


@pytest.mark.parametrize("coord", MODES)
def test_tflite_lowers_linear_resize_as_resize_bilinear(coord):
    """The tflite backend's RESIZE_BILINEAR rule takes the imported linear Resize."""
    import quantemu

    w = np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Resize", ["c", "roi", "scales"], ["y"], mode="linear",
            coordinate_transformation_mode=coord,
        ),
    ]  # fmt: skip
    inits = {
        "w": w,
        "roi": np.zeros(0, np.float32),
        "scales": np.array([1, 1, 2, 2], np.float32),
    }
    graph = load_onnx(model(nodes, {"x": (1, 3, 8, 8)}, ["y"], inits))
    calib = np.random.default_rng(1).normal(size=(8, 3, 8, 8)).astype(np.float32)
    program = quantemu.compile(graph, "tflite", calib)
    assert program.run(calib[:2]).outputs["y"].shape == (2, 4, 16, 16)
    assert [layer.op for layer in program.lowered.layers] == ["CONV_2D", "RESIZE_BILINEAR"]


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil"])
@pytest.mark.parametrize("size_in", [7, 10, 13])
def test_nearest_align_corners_reads_onnxruntimes_pixels(size_in, nearest_mode):
    """align_corners computes x * (in - 1) / (out - 1) in that order, as onnxruntime does (with
    the ratio first, 10 -> 31 rows read row 8 where onnxruntime reads row 7)."""
    for size_out in range(2, 40):
        node = helper.make_node(
            "Resize", ["x", "roi", "", "sizes"], ["y"], mode="nearest",
            coordinate_transformation_mode="align_corners", nearest_mode=nearest_mode,
        )  # fmt: skip
        inits = {"roi": np.zeros(0, np.float32), "sizes": np.array([1, 1, size_out, 1], np.int64)}
        m = model([node], {"x": (1, 1, size_in, 1)}, ["y"], inits)
        x = np.arange(size_in, dtype=np.float32).reshape(1, 1, size_in, 1)
        want = run_ort(m, {"x": x})[0]
        assert np.array_equal(load_onnx(m).run_float({"x": x})["y"], want), size_out


@pytest.mark.parametrize(
    ("mode", "coord", "rounding", "size_in", "scale"),
    [
        ("nearest", "half_pixel", "floor", 3, 1.0336597),  # same shape: a copy
        ("linear", "asymmetric", "floor", 7, 1.0065515),  # same shape: a copy
        ("nearest", "half_pixel_symmetric", "floor", 9, 0.8067227),  # float64 part
        ("nearest", "asymmetric", "floor", 3, 7 / 3),  # 3 * 2.3333333f rounds to 7 in float32
        ("linear", "half_pixel", "floor", 3, 7 / 3),
    ],
)
def test_scales_follow_onnxruntime(mode, coord, rounding, size_in, scale):
    """Where exact arithmetic and onnxruntime part: the output size is the float32 product
    truncated, an output of the input's shape is a copy whatever the scales, and
    half_pixel_symmetric adds its 0.5 in float64."""
    node = helper.make_node(
        "Resize", ["x", "roi", "scales"], ["y"], mode=mode,
        coordinate_transformation_mode=coord, nearest_mode=rounding,
    )  # fmt: skip
    scales = np.array([1, 1, scale, 1], np.float32)
    m = model([node], {"x": (1, 2, size_in, 4)}, ["y"], {"roi": np.zeros(0, np.float32),
                                                        "scales": scales}, opset=19)  # fmt: skip
    x = np.random.default_rng(3).normal(size=(1, 2, size_in, 4)).astype(np.float32)
    want = run_ort(m, {"x": x})[0]
    graph = load_onnx(m)
    assert graph.tensors["y"].shape == want.shape
    np.testing.assert_array_equal(graph.run_float({"x": x})["y"], want)
