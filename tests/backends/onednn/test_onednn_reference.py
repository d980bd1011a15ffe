"""The vectorised operators against the scalar references written from the page, with ==."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quantemu.backends.onednn import (
    AvgPool2dParams,
    Conv2dParams,
    ConvImpl,
    MatmulApi,
    MatmulParams,
    MaxPool2dParams,
    QuantizedImpl,
    ReorderParams,
    Requantization,
    avg_pool2d,
    conv2d,
    matmul,
    max_pool2d,
    reorder,
    requantize,
)
from quantemu.backends.onednn import reference as ref
from quantemu.backends.onednn.params import SrcType
from quantemu.errors import UnsupportedError
from tests.backends.onednn.strategies import ISAS, conv_geometry, saturating_values, values

DTYPES = {SrcType.U8: np.uint8, SrcType.S8: np.int8}


@st.composite
def matmul_cases(draw):
    src = draw(st.sampled_from(list(SrcType)))
    api = MatmulApi.GEMM if src is SrcType.S8 and draw(st.booleans()) else MatmulApi.MATMUL
    zp = 0 if api is MatmulApi.GEMM else draw(st.sampled_from([0, 1, -5, 127, 255, -128]))
    m, k, n = draw(st.integers(1, 3)), draw(st.integers(0, 7)), draw(st.integers(1, 3))
    a = draw(saturating_values(DTYPES[src], (m, k)))
    b = draw(saturating_values(np.int8, (k, n)))
    params = MatmulParams(draw(st.sampled_from(ISAS)), src, api, zp)
    return a, b, params


@settings(max_examples=150)
@given(matmul_cases())
def test_matmul_matches_reference(case):
    a, b, params = case
    got = matmul(a, b, params)
    assert got.acc.dtype == np.int32
    assert got.acc.tolist() == ref.matmul(a, b, params)


@st.composite
def conv_cases(draw):
    src = draw(st.sampled_from(list(SrcType)))
    groups = draw(st.integers(1, 2))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(kh, kh + 3)), draw(st.integers(kw, kw + 3))
    geometry = draw(conv_geometry((kh, kw), (h, w), groups))
    x = draw(saturating_values(DTYPES[src], (1, groups * cg, h, w)))
    wt = draw(saturating_values(np.int8, (groups * og, cg, kh, kw)))
    zp = draw(st.sampled_from([0, 0, 5, 200, 255, -3]))
    impl = draw(st.sampled_from(list(ConvImpl)))
    params = Conv2dParams(draw(st.sampled_from(ISAS)), src, impl, geometry, zp)
    return x, wt, params


@settings(max_examples=120)
@given(conv_cases())
def test_conv2d_matches_reference(case):
    x, w, params = case
    try:
        got = conv2d(x, w, params).acc
    except UnsupportedError as exc:  # only the page's §5.4 defect shapes are refused
        assert "§5.4" in str(exc)
        return
    assert got.dtype == np.int32
    assert np.array_equal(got, ref.conv2d(x, w, params))


binary32_scales = st.floats(2.0**-14, 2.0**10, width=32)


@settings(max_examples=100)
@given(
    acc=values(np.int8, (2, 3)).map(lambda a: a.astype(np.int64) * 997),
    scales=st.tuples(binary32_scales, binary32_scales, binary32_scales, binary32_scales),
    zps=st.tuples(st.integers(0, 255), st.integers(0, 255)),
    variant=st.tuples(st.sampled_from(list(QuantizedImpl)), st.booleans(), st.booleans()),
)
def test_requantize_matches_reference(acc, scales, zps, variant):
    impl, linear, with_bias = variant
    xs, w0, w1, ys = scales
    q = Requantization(xs, zps[0], (w0, w1, w0), ys, zps[1])
    bias = np.array([0.5, -3.25, 1e3], dtype=np.float32) if with_bias else None
    got = requantize(acc, 1, q, impl, w_round_trip=linear, bias=bias)
    want = [
        [
            ref.requantize(
                int(acc[i, o]),
                q.w_scales[o],
                q,
                impl,
                linear=linear,
                bias=None if bias is None else float(bias[o]),
            )
            for o in range(3)
        ]
        for i in range(2)
    ]
    assert got.dtype == np.uint8
    assert got.tolist() == want


@st.composite
def pool_cases(draw):
    dtype = draw(st.sampled_from([np.int8, np.uint8]))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    h, w = draw(st.integers(kh, kh + 3)), draw(st.integers(kw, kw + 3))
    pads = tuple(draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    x = draw(values(dtype, (1, 2, h, w)))
    return x, (kh, kw), strides, pads


@settings(max_examples=100)
@given(pool_cases(), st.booleans(), st.sampled_from(["jit", "ref"]), st.sampled_from(ISAS))
def test_avg_pool2d_matches_reference(case, exclude, impl, isa):
    x, kernel, strides, pads = case
    p = AvgPool2dParams(isa, kernel, exclude, impl, strides, pads)
    got = avg_pool2d(x, p)
    assert got.dtype == x.dtype
    assert np.array_equal(got, ref.avg_pool2d(x, p))


@settings(max_examples=60)
@given(pool_cases(), st.sampled_from(ISAS))
def test_max_pool2d_matches_reference(case, isa):
    x, kernel, strides, pads = case
    p = MaxPool2dParams(isa, kernel, strides, pads)
    got = max_pool2d(x, p)
    assert got.dtype == x.dtype
    assert np.array_equal(got, ref.max_pool2d(x, p))


special_floats = st.sampled_from(
    [0.5, 1.5, 2.5, -2.5, 127.5, -128.5, 255.5, -0.0, np.inf, -np.inf, np.nan, 3.4e38]
)


@settings(max_examples=100)
@given(
    x=st.lists(special_floats | st.floats(-400, 400, width=32), min_size=1, max_size=8),
    isa=st.sampled_from(ISAS),
    dst=st.sampled_from(["s8", "u8"]),
    src_scale=st.sampled_from([1.0]) | binary32_scales,
    dst_scale=st.sampled_from([1.0, 2.0]) | binary32_scales,
)
def test_reorder_matches_reference(x, isa, dst, src_scale, dst_scale):
    xa = np.array(x, dtype=np.float32)
    p = ReorderParams(isa, dst, src_scale, dst_scale)
    assert reorder(xa, p).tolist() == ref.reorder(xa, p)
