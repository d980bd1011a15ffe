"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR: the vectorized kernels against their scalar twins
(``==``), against the codes LiteRT's reference kernels and TFLite-Micro computed
(``resize_peer_vectors.json``, made by ``tools/make_resize_vectors.py``), and the Resize rule:
ONNX nearest resizes read the pixels the graph reads, linear ones map their coordinate mode."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite import reference
from quantemu.backends.tflite.resize import ResizeParams, resize_bilinear, resize_nearest
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize

VECTORS = json.loads((Path(__file__).parent / "resize_peer_vectors.json").read_text())["cases"]


def _case_arrays(case: dict):
    h, w, c = case["input_nhwc"]
    x = np.frombuffer(bytes.fromhex(case["x"]), np.int8).reshape(case["samples"], h, w, c)
    params = ResizeParams(
        tuple(case["size"]),
        case["align_corners"],
        case["half_pixel_centers"],
        bilinear=case["op"] == "bilinear",
    )
    return x.transpose(0, 3, 1, 2), params


def _kernel(x, params):
    return (resize_bilinear if params.bilinear else resize_nearest)(x, params)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    dims=st.tuples(*(st.integers(1, 9) for _ in range(4))),
    flags=st.sampled_from([(False, False), (True, False), (False, True), (True, True)]),
    bilinear=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_kernels_equal_their_scalar_twins(dims, flags, bilinear, seed):
    h, w, oh, ow = dims
    if bilinear and all(flags):
        return
    x = np.random.default_rng(seed).integers(-128, 128, (2, 2, h, w)).astype(np.int8)
    x[0, 0, 0, :] = -128  # the extreme codes, where a rounding slip would show first
    x[1, 1, -1, :] = 127
    params = ResizeParams((oh, ow), *flags, bilinear=bilinear)
    twin = reference.resize_bilinear if bilinear else reference.resize_nearest
    try:
        got = _kernel(x, params)
    except UnsupportedError as e:  # the Q10 scale would read past the row: refused, not run
        assert "beyond the input" in str(e)
        return
    np.testing.assert_array_equal(got, twin(x, (oh, ow), *flags))


@pytest.mark.parametrize("index", range(len(VECTORS)))
def test_kernels_equal_both_peers(index):
    case = VECTORS[index]
    x, params = _case_arrays(case)
    got = _kernel(x, params).transpose(0, 2, 3, 1)
    for peer, codes in case["outputs"].items():
        want = np.frombuffer(bytes.fromhex(codes), np.int8).reshape(got.shape)
        assert np.array_equal(got, want), peer


def test_the_vectors_cover_every_flag_pair_of_both_ops():
    seen = {(c["op"], c["align_corners"], c["half_pixel_centers"]) for c in VECTORS}
    assert len(seen) == 7  # bilinear cannot take both flags


def test_parameters_are_checked():
    with pytest.raises(InvalidInputError, match="cannot both be set"):
        ResizeParams((4, 4), True, True, bilinear=True)
    with pytest.raises(InvalidInputError, match="two positive"):
        ResizeParams((0, 4))
    x = np.zeros((1, 1, 1, 1), np.int8)
    with pytest.raises(UnsupportedError, match="beyond the input"):
        resize_bilinear(x, ResizeParams((1, 1100), bilinear=True))  # Q10 scale 1


def _resize_model(path, coord: str, nearest: str, scales) -> str:
    sc = numpy_helper.from_array(np.asarray(scales, np.float32), "scales")
    node = helper.make_node(
        "Resize",
        ["x", "", "scales"],
        ["y"],
        mode="nearest",
        coordinate_transformation_mode=coord,
        nearest_mode=nearest,
    )
    graph = helper.make_graph(
        [node],
        "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [sc],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (3, 3, 6, 8)).astype(np.float32)


@pytest.mark.parametrize(
    ("coord", "nearest", "scales", "flags"),
    [
        ("asymmetric", "floor", (1, 1, 2, 2), (False, False)),
        ("half_pixel", "round_prefer_floor", (1, 1, 2, 2), (False, True)),
        ("half_pixel", "round_prefer_ceil", (1, 1, 0.5, 0.5), (False, True)),
        # ONNX's default tie rule downsampling by 2 reads the even pixels: TFLite's plain floor
        ("half_pixel", "round_prefer_floor", (1, 1, 0.5, 0.5), (False, False)),
        ("align_corners", "round_prefer_ceil", (1, 1, 1.5, 2), (True, False)),
        # by 1.5 its ties fall where TFLite's half-pixel floor rounds the other way
        ("pytorch_half_pixel", "round_prefer_floor", (1, 1, 3, 1.5), (False, False)),
    ],
)
def test_nearest_resize_reads_the_pixels_the_graph_reads(tmp_path, coord, nearest, scales, flags):
    path = _resize_model(tmp_path / "r.onnx", coord, nearest, scales)
    program = quantemu.compile(path, "tflite", calib=_x(1))
    (layer,) = program.lowered.layers
    assert layer.op == "RESIZE_NEAREST_NEIGHBOR"
    assert (layer.params.align_corners, layer.params.half_pixel_centers) == flags
    result = program.run(_x(2), keep="all").tensors
    x, y = result["x"], result["y"]
    assert y.encoding == x.encoding
    # The graph's own float kernel, run on the input codes, gives the output codes.
    moved = program.graph.run_float(x.codes.astype(np.float32))["y"]
    np.testing.assert_array_equal(y.codes, moved.astype(np.int8))


def test_a_nearest_resize_no_flag_pair_reproduces_is_refused(tmp_path):
    path = _resize_model(tmp_path / "r.onnx", "asymmetric", "ceil", (1, 1, 2, 2))
    with pytest.raises(UnsupportedError, match="no RESIZE_NEAREST_NEIGHBOR"):
        quantemu.compile(path, "tflite", calib=_x(1))


@pytest.mark.parametrize(
    ("coord", "flags"),
    [
        ("half_pixel", (False, True)),
        ("align_corners", (True, False)),
        ("asymmetric", (False, False)),
    ],
)
def test_linear_resize_maps_its_coordinate_mode(tmp_path, coord, flags):
    graph = optimize(load_onnx(_resize_model(tmp_path / "r.onnx", coord, "floor", (1, 1, 2, 2))))
    node = graph.nodes[0]
    linear = graph.replace(
        nodes=(dataclasses.replace(node, attrs=node.attrs.merged(mode="linear")),)
    )
    program = quantemu.compile(linear, "tflite", calib=_x(1))
    (layer,) = program.lowered.layers
    assert layer.op == "RESIZE_BILINEAR"
    assert (layer.params.align_corners, layer.params.half_pixel_centers) == flags
    result = program.run(_x(2), keep="all").tensors
    want = reference.resize_bilinear(result["x"].codes, (12, 16), *flags)
    np.testing.assert_array_equal(result["y"].codes, want)


def test_xs3_lowers_a_nearest_resize_only_as_xmos_runs_it(tmp_path):
    # XMOS's runtime ignores half_pixel_centers: 2x up reads the same pixels without it ...
    up = _resize_model(tmp_path / "up.onnx", "half_pixel", "round_prefer_floor", (1, 1, 2, 2))
    (layer,) = quantemu.compile(up, "xs3", calib=_x(1)).lowered.layers
    assert (layer.op, layer.params.half_pixel_centers) == ("RESIZE_NEAREST_NEIGHBOR", False)
    # ... 2x down with ties rounded up reads the odd pixels, which only the flag gives.
    down = _resize_model(tmp_path / "dn.onnx", "half_pixel", "round_prefer_ceil", (1, 1, 0.5, 0.5))
    with pytest.raises(UnsupportedError, match="no RESIZE_NEAREST_NEIGHBOR"):
        quantemu.compile(down, "xs3", calib=_x(1))
    quantemu.compile(down, "tflite", calib=_x(1))
