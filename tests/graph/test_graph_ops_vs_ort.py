"""Every supported operator, imported and run by the float executor, against onnxruntime.

Each case is one node with random inputs and weights, odd shapes, and the attribute variants
that change the arithmetic (padding, strides, dilations, groups, ceil_mode, opset forms).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx_models import ORT_REASON, assert_matches_ort, single, weights

pytest.importorskip("onnxruntime", reason=ORT_REASON)

W = weights
X = (2, 3, 9, 11)  # batch 2, 3 channels, odd spatial size


def _i64(*values):
    return np.array(values, dtype=np.int64)


def _f32(*values):
    return np.array(values, dtype=np.float32)


CONV = [
    ("basic", [X, W((5, 3, 3, 3)), W((5,))], {"pads": [1, 1, 1, 1]}),
    (
        "stride_dilation_asym_pads",
        [X, W((4, 3, 3, 3))],
        {"strides": [2, 3], "dilations": [2, 1], "pads": [0, 1, 2, 1]},
    ),
    ("group2_rect", [(1, 4, 8, 7), W((6, 2, 3, 2)), W((6,))], {"group": 2, "pads": [1, 0, 1, 1]}),
    (
        "depthwise_multiplier",
        [(1, 5, 10, 9), W((10, 1, 3, 3)), W((10,))],
        {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]},
    ),
    ("same_upper", [X, W((4, 3, 3, 3))], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("same_lower", [X, W((4, 3, 4, 4))], {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ("valid", [X, W((4, 3, 3, 3))], {"auto_pad": "VALID"}),
    ("pointwise_stride2", [X, W((6, 3, 1, 1)), W((6,))], {"strides": [2, 2]}),
    ("kernel_shape_given", [X, W((2, 3, 2, 2))], {"kernel_shape": [2, 2]}),
]


@pytest.mark.parametrize("opset", [11, 17, 21])
@pytest.mark.parametrize(("args", "attrs"), [c[1:] for c in CONV], ids=[c[0] for c in CONV])
def test_conv(args, attrs, opset):
    assert_matches_ort(*single("Conv", args, opset=opset, **attrs))


CONV_T = [
    (
        "stride2_outpad",
        [(1, 3, 5, 4), W((3, 4, 3, 3)), W((4,))],
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
    ),
    (
        "group_dilation",
        [(2, 4, 4, 5), W((4, 3, 2, 3))],
        {"group": 2, "dilations": [2, 1], "pads": [0, 1, 1, 0]},
    ),
    ("output_shape", [(1, 2, 4, 4), W((2, 3, 3, 3))], {"strides": [2, 2], "output_shape": [8, 8]}),
    ("same_upper", [(1, 2, 5, 4), W((2, 3, 3, 3))], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("same_lower", [(1, 2, 5, 4), W((2, 3, 4, 4))], {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ("valid", [(1, 2, 5, 4), W((2, 3, 3, 3))], {"strides": [2, 2], "auto_pad": "VALID"}),
    (
        "pads_beyond_kernel",
        [(1, 2, 6, 5), W((2, 3, 2, 2))],
        {"strides": [3, 3], "pads": [3, 2, 2, 3]},
    ),
]


@pytest.mark.parametrize(("args", "attrs"), [c[1:] for c in CONV_T], ids=[c[0] for c in CONV_T])
def test_conv_transpose(args, attrs):
    assert_matches_ort(*single("ConvTranspose", args, **attrs))


GEMM = [
    ("plain", [(4, 6), W((6, 5)), W((5,))], {}),
    ("transB_alpha_beta", [(3, 6), W((5, 6)), W((1, 5))], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("transA_full_C", [(6, 3), W((6, 5)), W((3, 5))], {"transA": 1}),
    ("no_C", [(2, 7), W((7, 4))], {"alpha": 1.5}),
    ("scalar_C", [(2, 7), W((7, 4)), np.array(0.25, dtype=np.float32)], {}),
    ("column_C", [(3, 7), W((7, 4)), W((3, 1))], {"beta": -1.0}),
]


@pytest.mark.parametrize(("args", "attrs"), [c[1:] for c in GEMM], ids=[c[0] for c in GEMM])
def test_gemm(args, attrs):
    assert_matches_ort(*single("Gemm", args, **attrs))


@pytest.mark.parametrize(
    "args",
    [
        [(4, 6), W((6, 3))],
        [(2, 3, 6), W((6, 5))],
        [(2, 3, 4), (2, 4, 5)],
        [(5,), W((5, 3))],
        [(2, 4, 5), W((5,))],
        [(3, 1, 2, 4), (5, 4, 3)],
    ],
    ids=["2d", "batched_const", "batched_both", "vec_mat", "mat_vec", "broadcast_batch"],
)
def test_matmul(args):
    assert_matches_ort(*single("MatMul", args))


BROADCASTS = [
    [X, X],
    [X, W((3, 1, 1))],
    [X, np.array(0.75, dtype=np.float32)],
    [(1, 3, 1, 11), (2, 1, 9, 1)],
    [(11,), X],
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("args", BROADCASTS, ids=["same", "channel", "scalar", "both", "vector"])
def test_binary(op, args):
    if op == "Div":  # keep divisors away from zero so the comparison is meaningful
        args = [
            a if not isinstance(a, np.ndarray) else np.asarray(np.abs(a) + 0.5, a.dtype)
            for a in args
        ]
        m, feeds = single(op, args)
        if "in1" in feeds:
            feeds["in1"] = np.abs(feeds["in1"]) + 0.5
        assert_matches_ort(m, feeds)
        return
    assert_matches_ort(*single(op, args))


UNARY = [
    ("Relu", {}, 13),
    ("Sigmoid", {}, 13),
    ("Tanh", {}, 13),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 13),
    ("HardSigmoid", {}, 11),
    ("HardSwish", {}, 14),
    ("LeakyRelu", {"alpha": 0.2}, 13),
    ("LeakyRelu", {}, 16),
    ("Identity", {}, 13),
    ("Softmax", {}, 13),
    ("Softmax", {"axis": 1}, 13),
    ("Softmax", {"axis": 1}, 11),
    ("Softmax", {"axis": -1}, 11),
    ("Flatten", {}, 13),
    ("Flatten", {"axis": 0}, 11),
    ("Flatten", {"axis": -1}, 13),
    ("Transpose", {}, 13),
    ("Transpose", {"perm": [0, 2, 3, 1]}, 13),
    ("GlobalAveragePool", {}, 13),
    ("GlobalMaxPool", {}, 13),
    ("LRN", {"size": 3}, 13),
    ("LRN", {"size": 5, "alpha": 0.001, "beta": 0.5, "bias": 2.0}, 13),
    ("ReduceMean", {"axes": [2, 3]}, 13),
    ("ReduceMean", {"axes": [-1, -2], "keepdims": 0}, 13),
    ("ReduceMean", {}, 11),
]


@pytest.mark.parametrize(("op", "attrs", "opset"), UNARY, ids=[f"{c[0]}-{c[2]}" for c in UNARY])
def test_unary(op, attrs, opset):
    assert_matches_ort(*single(op, [X], opset=opset, **attrs))


def test_large_magnitude_activations():
    m, feeds = single("Sigmoid", [X])
    feeds["in0"] *= 60  # exp overflow territory must not warn or produce NaN
    assert_matches_ort(m, feeds)


@pytest.mark.parametrize(
    "slope",
    [W((3, 1, 1)), np.array(0.1, dtype=np.float32), W((11,))],
    ids=["channel", "scalar", "w"],
)
def test_prelu(slope):
    assert_matches_ort(*single("PRelu", [X, slope]))


@pytest.mark.parametrize(
    ("args", "opset", "attrs"),
    [
        ([X], 9, {"min": -0.5, "max": 0.7}),
        ([X, _f32(0.0), _f32(6.0)], 11, {}),
        ([X, _f32(-0.3)], 13, {}),
        ([X, "", _f32(0.4)], 13, {}),
        ([X], 13, {}),
    ],
    ids=["attrs-9", "relu6-11", "min_only", "max_only", "none"],
)
def test_clip(args, opset, attrs):
    m, feeds = single("Clip", args, opset=opset, **attrs)
    feeds["in0"] *= 4
    assert_matches_ort(m, feeds)


MAXPOOL = [
    ("k3s2p1", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 13),
    ("ceil", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, 13),
    (
        "ceil_pads",
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
        13,
    ),
    ("dilated", {"kernel_shape": [2, 3], "dilations": [2, 2]}, 12),
    ("same_upper", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, 11),
    ("default_stride", {"kernel_shape": [2, 2]}, 9),
]


@pytest.mark.parametrize(("attrs", "opset"), [c[1:] for c in MAXPOOL], ids=[c[0] for c in MAXPOOL])
def test_maxpool(attrs, opset):
    assert_matches_ort(*single("MaxPool", [X], opset=opset, **attrs))


AVGPOOL = [
    ("k3s2p1_exclude", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 13),
    (
        "k3s2p1_include",
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        13,
    ),
    ("ceil_exclude", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, 13),
    (
        "ceil_include_pads",
        {
            "kernel_shape": [3, 2],
            "strides": [2, 2],
            "pads": [1, 1, 0, 1],
            "ceil_mode": 1,
            "count_include_pad": 1,
        },
        13,
    ),
    ("same_lower", {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}, 11),
    ("dilated-19", {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [1, 1, 1, 1]}, 19),
]


@pytest.mark.parametrize(("attrs", "opset"), [c[1:] for c in AVGPOOL], ids=[c[0] for c in AVGPOOL])
def test_average_pool(attrs, opset):
    assert_matches_ort(*single("AveragePool", [X], opset=opset, **attrs))


@pytest.mark.parametrize("opset", [9, 14, 15])
def test_batchnorm(opset):
    var = np.abs(W((3,))) + 0.5
    args = [X, W((3,)) + 1, W((3,), seed=2), W((3,), seed=3), var]
    assert_matches_ort(*single("BatchNormalization", args, opset=opset, epsilon=1e-3))


@pytest.mark.parametrize(
    ("shape", "opset", "attrs"),
    [
        ((0, 3, -1), 13, {}),
        ((-1, 11), 13, {}),
        ((2, 0, 99), 14, {"allowzero": 0}),
        ((6, 3, 3, 11), 21, {}),
    ],
    ids=["copy_and_infer", "infer_leading", "allowzero0", "explicit-21"],
)
def test_reshape(shape, opset, attrs):
    assert_matches_ort(*single("Reshape", [X, _i64(*shape)], opset=opset, **attrs))


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_concat(axis):
    other = {1: (2, 2, 9, 11), -1: (2, 3, 9, 4), 0: (1, 3, 9, 11)}[axis]
    assert_matches_ort(*single("Concat", [X, other, W(other)], axis=axis))


RESIZE_13 = [
    ("half_pixel_default", _f32(1, 1, 2, 2), {}),
    (
        "asymmetric_floor",
        _f32(1, 1, 2, 3),
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    ),
    (
        "align_corners_ceil",
        _f32(1, 1, 1.5, 2),
        {"coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"},
    ),
    (
        "pytorch_half_pixel_down",
        _f32(1, 1, 0.5, 0.5),
        {"coordinate_transformation_mode": "pytorch_half_pixel"},
    ),
    (
        "tf_half_pixel_ceil",
        _f32(1, 1, 3, 2),
        {"coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": "ceil"},
    ),
]


@pytest.mark.parametrize(
    ("scales", "attrs"), [c[1:] for c in RESIZE_13], ids=[c[0] for c in RESIZE_13]
)
def test_resize_scales(scales, attrs):
    assert_matches_ort(*single("Resize", [X, "", scales], mode="nearest", **attrs))


def test_resize_sizes_and_opset11_roi():
    assert_matches_ort(
        *single(
            "Resize",
            [X, _f32(), _f32(), _i64(2, 3, 17, 25)],
            opset=11,
            mode="nearest",
            nearest_mode="floor",
        )
    )


def test_resize_axes_and_symmetric_opset19():
    assert_matches_ort(
        *single(
            "Resize",
            [X, "", _f32(2, 3)],
            opset=19,
            axes=[2, 3],
            mode="nearest",
            coordinate_transformation_mode="half_pixel_symmetric",
        )
    )


def test_upsample_opset9():
    assert_matches_ort(*single("Upsample", [X, _f32(1, 1, 2, 3)], opset=9, mode="nearest"))


def test_reduce_mean_axes_input_opset18():
    assert_matches_ort(*single("ReduceMean", [X, _i64(2, 3)], opset=18, keepdims=1))


@pytest.mark.parametrize("opset", [11, 13])
def test_dropout(opset):
    args = [X] if opset == 11 else [X, np.array(0.3, np.float32), np.array(False)]
    assert_matches_ort(*single("Dropout", args, opset=opset))
