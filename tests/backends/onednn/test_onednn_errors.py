"""One test per validation error: the exception type and what its message names."""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends.onednn import (
    AvgPool2dParams,
    Conv2dParams,
    ConvGeometry,
    MatmulParams,
    MaxPool2dParams,
    QuantizedLinearParams,
    ReorderParams,
    Requantization,
    avg_pool2d,
    conv2d,
    conv_overflow_risk,
    linear_overflow_risk,
    matmul,
    max_pool2d,
    quantize_rnn_data,
    quantized_linear,
    reorder,
    rnn_weights_scales,
)
from quantemu.backends.onednn.conformance import conv2d_case, matmul_case
from quantemu.backends.onednn.params import from_mapping
from quantemu.errors import InvalidInputError, UnsupportedError

U8 = np.zeros((2, 3), dtype=np.uint8)
S8 = np.zeros((3, 2), dtype=np.int8)


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_unknown_isa_lists_choices():
    _raises(
        InvalidInputError,
        r"isa = 'sse41' is not one of 'avx2'.*'avx512_core_amx'",
        MatmulParams,
        "sse41",
        "u8",
    )


def test_unknown_src_dt():
    _raises(InvalidInputError, r"src_dt = 'u4'", MatmulParams, "avx2", "u4")


def test_unknown_conv_impl():
    _raises(InvalidInputError, r"conv2d impl = 'winograd'", Conv2dParams, "avx2", "u8", "winograd")


def test_zero_point_must_be_an_int():
    _raises(
        InvalidInputError,
        r"src_zero_point = True must be an integer",
        MatmulParams,
        "avx2",
        "u8",
        "matmul",
        True,
    )
    _raises(
        InvalidInputError,
        r"src_zero_point = 4294967296 is outside",
        MatmulParams,
        "avx2",
        "u8",
        "matmul",
        2**32,
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strides": (0, 1)}, r"strides\[0\] = 0 is outside \[1, "),
        ({"pads": (0, -1, 0, 0)}, r"pads\[1\] = -1 is outside \[0, "),
        ({"pads": (0, 0)}, r"pads = \(0, 0\) must be a list of 4 integers"),
        ({"dilations": (1, 0)}, r"dilations\[1\] = 0"),
        ({"groups": 0}, r"groups = 0 is outside"),
    ],
)
def test_geometry_fields(kwargs, match):
    _raises(InvalidInputError, match, ConvGeometry, **kwargs)


def test_scale_must_be_binary32():
    _raises(
        InvalidInputError,
        r"x_scale = 0.1 is not a binary32 value.*numpy.float32",
        Requantization,
        0.1,
        0,
        (1.0,),
        1.0,
        0,
    )


def test_scale_must_be_positive():
    _raises(
        InvalidInputError,
        r"y_scale = -1.0 must be a finite positive scale",
        Requantization,
        1.0,
        0,
        (1.0,),
        -1.0,
        0,
    )


def test_zero_points_of_quint8():
    _raises(
        InvalidInputError,
        r"x_zero_point = 256 is outside \[0, 255\]",
        Requantization,
        1.0,
        256,
        (1.0,),
        1.0,
        0,
    )


def test_w_scales_not_empty():
    _raises(
        InvalidInputError,
        r"w_scales = \(\) must be a non-empty list",
        Requantization,
        1.0,
        0,
        (),
        1.0,
        0,
    )


def test_linear_impl_families():
    q = Requantization(1.0, 0, (1.0,), 1.0, 0)
    _raises(
        InvalidInputError,
        r"impl = 'jit_avx512'.*'jit_uni'.*'brgemm'",
        QuantizedLinearParams,
        "avx512_core",
        "jit_avx512",
        q,
    )


def test_exclude_padding_must_be_bool():
    _raises(
        InvalidInputError,
        r"exclude_padding = 1 must be true or false",
        AvgPool2dParams,
        "avx2",
        (2, 2),
        1,
        "jit",
    )


def test_from_mapping_unknown_and_missing_keys():
    _raises(
        InvalidInputError,
        r"unknown parameter\(s\) 'colour'; known: api, isa",
        from_mapping,
        MatmulParams,
        {"isa": "avx2", "src_dt": "u8", "colour": 1},
        "here",
    )
    _raises(
        InvalidInputError,
        r"here: missing parameter\(s\) 'src_dt'",
        from_mapping,
        MatmulParams,
        {"isa": "avx2"},
        "here",
    )


def test_matmul_operand_dtypes():
    _raises(
        InvalidInputError,
        r"A must be a 2-D uint8 array for src_dt = 'u8', got int8",
        matmul,
        U8.astype(np.int8),
        S8,
        MatmulParams("avx2", "u8"),
    )
    _raises(
        InvalidInputError,
        r"B must be a 2-D int8 array, got uint8",
        matmul,
        U8,
        S8.astype(np.uint8),
        MatmulParams("avx2", "u8"),
    )


def test_matmul_shapes():
    _raises(
        InvalidInputError,
        r"A is \(2, 3\) and B is \(2, 2\)",
        matmul,
        U8,
        S8[:2],
        MatmulParams("avx2", "u8"),
    )


def test_gemm_is_s8_without_zero_point():
    _raises(
        UnsupportedError,
        r"api = 'gemm'.*src_dt = 'u8'",
        matmul,
        U8,
        S8,
        MatmulParams("avx2", "u8", "gemm"),
    )
    _raises(
        UnsupportedError,
        r"src_zero_point = 3",
        matmul,
        U8.astype(np.int8),
        S8,
        MatmulParams("avx2", "s8", "gemm", 3),
    )


def test_s32_overflow_is_refused():
    b = np.full((3, 1), 127, dtype=np.int8)
    _raises(
        UnsupportedError,
        r"leaves s32",
        matmul,
        U8,
        b,
        MatmulParams("avx2_vnni", "u8", "matmul", -(2**31)),
    )


def test_conv_source_dtype():
    x = np.zeros((1, 2, 3, 3), dtype=np.int8)
    w = np.zeros((1, 2, 1, 1), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"x must be a 4-D \(N, C, H, W\) uint8 array for src_dt = 'u8'",
        conv2d,
        x,
        w,
        Conv2dParams("avx2", "u8", "direct"),
    )


def test_conv_groups_must_divide_channels():
    x = np.zeros((1, 3, 3, 3), dtype=np.uint8)
    w = np.zeros((2, 3, 1, 1), dtype=np.int8)
    p = Conv2dParams("avx2", "u8", "direct", ConvGeometry(groups=3))
    _raises(InvalidInputError, r"C = 3 channels.*groups = 3", conv2d, x, w, p)


def test_conv_window_must_fit():
    x = np.zeros((1, 1, 2, 2), dtype=np.uint8)
    w = np.zeros((1, 1, 3, 3), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"window 3x3 .* does not fit the padded input 2x2",
        conv2d,
        x,
        w,
        Conv2dParams("avx2", "u8", "direct"),
    )


def test_conv_relocation_defects_are_refused():
    # §5.4: C/groups = 1, KW > 1, OW = 1, stride_w > 1 with kernel relocation
    x = np.zeros((1, 1, 5, 4), dtype=np.uint8)
    w = np.zeros((1, 1, 3, 3), dtype=np.int8)
    p = Conv2dParams("avx512_core", "u8", "relo_w", ConvGeometry(strides=(1, 2)))
    _raises(UnsupportedError, r"§5.4", conv2d, x, w, p)
    # §5.4: s8 source, relo_wh with left/right padding
    x8 = np.zeros((1, 1, 5, 8), dtype=np.int8)
    p8 = Conv2dParams("avx512_core", "s8", "relo_wh", ConvGeometry(pads=(0, 1, 0, 1)))
    _raises(UnsupportedError, r"s8 source and left/right padding", conv2d, x8, w, p8)


def test_requantization_scale_count():
    q = Requantization(1.0, 0, (1.0, 1.0), 1.0, 0)
    p = QuantizedLinearParams("avx2", "jit_uni", q)
    w = np.zeros((3, 3), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"w_scales has 2 values for 3 output channels",
        quantized_linear,
        U8,
        w,
        p,
    )


def test_bias_dtype_and_shape():
    q = Requantization(1.0, 0, (1.0,), 1.0, 0)
    p = QuantizedLinearParams("avx2", "jit_uni", q)
    w = np.zeros((2, 3), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"bias must be a float32 array.*\(2,\), got float64 \(2,\)",
        quantized_linear,
        U8,
        w,
        p,
        np.zeros(2),
    )


def test_pool_window_without_in_bounds_element():
    x = np.zeros((1, 1, 1, 1), dtype=np.int8)
    p = AvgPool2dParams("avx2", (1, 1), True, "jit", (1, 1), (1, 0, 0, 0))
    _raises(
        InvalidInputError,
        r"output \(0, 0\) has a window with no in-bounds element",
        avg_pool2d,
        x,
        p,
    )
    _raises(
        InvalidInputError,
        r"a window has no in-bounds element",
        max_pool2d,
        x,
        MaxPool2dParams("avx2", (1, 1), (1, 1), (1, 0, 0, 0)),
    )


def test_pool_dtype():
    x = np.zeros((1, 1, 2, 2), dtype=np.int16)
    _raises(
        InvalidInputError,
        r"int8/uint8 array, got int16",
        max_pool2d,
        x,
        MaxPool2dParams("avx2", (1, 1)),
    )


def test_reorder_dtype():
    _raises(
        InvalidInputError,
        r"x must be a float32 array, got float64 array",
        reorder,
        np.zeros(2),
        ReorderParams("avx2", "s8"),
    )


def test_adapter_inputs():
    _raises(
        InvalidInputError,
        r"inputs must be A, B; got A",
        matmul_case,
        {"A": U8},
        {"isa": "avx2", "src_dt": "u8"},
    )
    _raises(
        InvalidInputError,
        r"onednn/conv2d: missing parameter\(s\) 'impl'",
        conv2d_case,
        {"x": np.zeros((1, 1, 1, 1), np.uint8), "w": np.zeros((1, 1, 1, 1), np.int8)},
        {"isa": "avx2", "src_dt": "u8"},
    )


def test_rnn_helpers_validate():
    _raises(
        InvalidInputError, r"must be a float32 array, got float64", quantize_rnn_data, np.zeros(2)
    )
    _raises(InvalidInputError, r"W_max = 0", rnn_weights_scales, np.zeros(3, np.float32))


def test_overflow_range_and_weights():
    w = np.zeros((2, 4), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"activation_range = \(0, 300\)",
        linear_overflow_risk,
        w,
        "avx2",
        activation_range=(0, 300),
    )
    _raises(InvalidInputError, r"w must be a 4-D int8 array", conv_overflow_risk, w, "avx2")


def test_quantized_linear_operands():
    q = Requantization(1.0, 0, (1.0,), 1.0, 0)
    p = QuantizedLinearParams("avx2", "jit_uni", q)
    w = np.zeros((2, 3), dtype=np.int8)
    _raises(
        InvalidInputError,
        r"x must be a 2-D uint8 array \(M, K\), got int8",
        quantized_linear,
        U8.astype(np.int8),
        w,
        p,
    )
    _raises(
        InvalidInputError,
        r"x is \(2, 3\) \(M, K\) and w is \(2, 2\) \(N, K\)",
        quantized_linear,
        U8,
        w[:, :2],
        p,
    )


def test_predict_conv_impl_shapes():
    from quantemu.backends.onednn import predict_conv_impl

    _raises(
        InvalidInputError,
        r"x_shape \(1, 2, 3\) and w_shape .* must both have 4 dims",
        predict_conv_impl,
        "avx2",
        "u8",
        (1, 2, 3),
        (1, 2, 1, 1),
        ConvGeometry(),
    )


def test_activation_qparams_range():
    from quantemu.backends.onednn import activation_qparams, weight_scales

    _raises(
        InvalidInputError, r"need finite x_min <= x_max, got 2.0, 1.0", activation_qparams, 2.0, 1.0
    )
    _raises(
        InvalidInputError,
        r"weight_scales: w must be a float32 array",
        weight_scales,
        np.zeros((2, 2)),
    )
