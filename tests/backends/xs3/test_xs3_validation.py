"""Every constraint violation raises InvalidInputError with a message naming values and remedy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from quantemu.backends import xs3
from quantemu.backends.registry import lookup
from quantemu.backends.xs3 import (
    ConvParams,
    Model,
    OutputOptions,
    Window,
    YParams,
    pack_bso,
    unpack_bso,
)
from quantemu.errors import InvalidInputError

I8 = np.int8


def _bso(c):
    return pack_bso(
        np.zeros(c, dtype=np.int64), shift1=0, scale=1, offset_scale=0, offset=0, shift2=0
    )


def _params(window=None, y=(1, 1, 4), zp=0):
    return ConvParams(zp, window or Window(1, 1), YParams(*y))


def _raises(match, fn, *args, **kwargs):
    with pytest.raises(InvalidInputError, match=match) as info:
        fn(*args, **kwargs)
    return str(info.value)


# --- parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: Model.parse("silicon"),
            r"model = 'silicon'; choose 'host_reference' \(XMOS's x86 C reference, which every "
            r"conformance vector pins\) or 'device' \(what the XS3 assembly kernels imply",
        ),
        (lambda: Window(0, 1), r"window.height = 0 is outside \[1, \+inf\]"),
        (lambda: Window(1, 1, stride_h=0), r"window.stride_h = 0 is outside \[1"),
        (lambda: Window(1, 1, start_row=0.5), r"window.start_row must be an integer, got 0.5"),
        (lambda: Window(True, 1), r"window.height must be an integer, got True"),
        (lambda: YParams(1, 1, 0), r"y_params.channels = 0 is outside \[1"),
        (lambda: OutputOptions(1), r"symmetric_saturation must be true or false, got 1"),
        (lambda: _params(zp=128), r"zero_point = 128 is outside \[-128, 127\]"),
        (lambda: ConvParams(0, (1, 1), YParams(1, 1, 4)), r"window must be a Window, got tuple"),
        (lambda: Window.from_attrs({"height": 1}), r"window: missing key\(s\) 'width'"),
        (lambda: Window.from_attrs([1]), r"window must be an object, got list"),
        (
            lambda: YParams.from_attrs({"height": 1, "width": 1, "channels": 4, "depth": 1}),
            r"y_params: unknown key\(s\) 'depth'; the known keys are height, width, channels",
        ),
    ],
)
def test_parameter_errors(build, match):
    _raises(match, build)


# --- BSO ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, match",
    [
        (
            ([2**31], 0, 0, 0, 0, 0),
            r"bias\[0\] = 2147483648 is outside \[-2147483648, 2147483647\]",
        ),
        (([0, 0], [0, 32], 0, 0, 0, 0), r"shift1\[1\] = 32 is outside \[0, 31\]"),
        (([0], 0, [40000], 0, 0, 0), r"scale\[0\] = 40000 is outside \[-32768, 32767\]"),
        (([0], 0, 0, 0, [1.5], 0), r"offset must be integers, got dtype float64"),
        (([0, 0], 0, [1, 2, 3], 0, 0, 0), r"scale has shape \(3,\), expected \(2,\) like bias"),
        (([], 0, 0, 0, 0, 0), r"bias must be a 1-D array of at least one channel"),
    ],
)
def test_pack_bso_errors(args, match):
    names = ("shift1", "scale", "offset_scale", "offset", "shift2")
    _raises("pack_bso: " + match, pack_bso, args[0], **dict(zip(names, args[1:], strict=True)))


def test_bso_dtype_and_shape_errors():
    x, k = np.zeros((1, 1, 4), I8), np.zeros((4, 4), I8)
    msg = _raises(
        r"BSO must be an int16 array, got int32; build it with xs3.pack_bso",
        xs3.conv2d_1x1,
        x,
        k,
        _bso(4).astype(np.int32),
    )
    assert msg.startswith("conv2d_1x1: ")
    _raises(r"BSO must be an int16 array, got list", xs3.conv2d_1x1, x, k, [[0]])
    _raises(
        re.escape(
            "BSO has shape (2, 7, 16), expected (ceil(C_out/16), 7, 16) = (1, 7, 16) for C_out = 4"
        ),
        xs3.conv2d_1x1,
        x,
        k,
        np.zeros((2, 7, 16), np.int16),
    )


@pytest.mark.parametrize("row, word, shown", [(2, 32, 32), (6, -1, 65535), (6, 1000, 1000)])
def test_shift_words_outside_0_31(row, word, shown):
    bso = _bso(4)
    bso[0, row, 1] = word
    name = "shift1 (BSO row 2)" if row == 2 else "shift2 (BSO row 6)"
    msg = _raises(re.escape(f"{name} of channel 1 = {shown}"), unpack_bso, bso, 4)
    assert "C undefined behaviour" in msg and "use a shift in 0..31" in msg


def test_bso_tail_shift_words_are_ignored():
    bso = _bso(4)
    bso[0, 2, 4:] = -1  # slots of channels 4..15 do not exist for C = 4
    assert unpack_bso(bso, 4).shift1.tolist() == [0] * 4


# --- tensors and channel counts ----------------------------------------------------------------


def test_tensor_errors():
    k, bso = np.zeros((4, 4), I8), _bso(4)
    _raises(r"conv2d_1x1: X must be a NumPy int8 array, got list", xs3.conv2d_1x1, [[0]], k, bso)
    msg = _raises(
        r"conv2d_1x1: X must have dtype int8, got int16",
        xs3.conv2d_1x1,
        np.zeros((1, 1, 4), np.int16),
        k,
        bso,
    )
    assert ".astype(np.int8)" in msg
    _raises(
        r"X must have 3 dimensions, got shape \(1, 4\)",
        xs3.conv2d_1x1,
        np.zeros((1, 4), I8),
        k,
        bso,
    )
    _raises(
        r"X has an empty dimension, shape \(0, 1, 4\)",
        xs3.conv2d_1x1,
        np.zeros((0, 1, 4), I8),
        k,
        bso,
    )


def test_channel_multiples_of_4():
    msg = _raises(
        r"conv2d_deep: X_c \(input channels\) = 3 is not a multiple of 4",
        xs3.conv2d_deep,
        np.zeros((1, 1, 3), I8),
        np.zeros((4, 1, 1, 3), I8),
        _bso(4),
        _params(),
    )
    assert "pad the channels with zeros to 4" in msg
    _raises(
        r"conv2d_1x1: Y_c \(output channels\) = 6 is not a multiple of 4",
        xs3.conv2d_1x1,
        np.zeros((1, 1, 4), I8),
        np.zeros((6, 4), I8),
        _bso(6),
    )
    _raises(
        r"conv2d_depthwise: X_c \(input channels\) = 6 is not a multiple of 4",
        xs3.conv2d_depthwise,
        np.zeros((1, 1, 6), I8),
        np.zeros((1, 1, 6), I8),
        _bso(6),
        _params(y=(1, 1, 6)),
    )
    _raises(
        r"fully_connected_8: C_in = 6 is not a multiple of 4",
        xs3.fully_connected_8,
        np.zeros((1, 6), I8),
        np.zeros(6, I8),
        _bso(1),
    )


def test_kernel_and_y_params_shapes():
    x = np.zeros((2, 2, 4), I8)
    _raises(
        r"conv2d_deep: y_params.channels = 8 but K has 4 output channels",
        xs3.conv2d_deep,
        x,
        np.zeros((4, 1, 1, 4), I8),
        _bso(4),
        _params(y=(1, 1, 8)),
    )
    _raises(
        re.escape(
            "conv2d_deep: K has shape (4, 2, 1, 4), expected (4, 1, 1, 4) "
            "((C_out, window.height, window.width, C_in))"
        ),
        xs3.conv2d_deep,
        x,
        np.zeros((4, 2, 1, 4), I8),
        _bso(4),
        _params(),
    )
    _raises(
        re.escape("conv2d_1x1: K has shape (4, 8), expected (4, 4)"),
        xs3.conv2d_1x1,
        x,
        np.zeros((4, 8), I8),
        _bso(4),
    )
    _raises(
        re.escape("conv2d_depthwise: K has shape (2, 1, 4), expected (1, 1, 4)"),
        xs3.conv2d_depthwise,
        x,
        np.zeros((2, 1, 4), I8),
        _bso(4),
        _params(),
    )
    _raises(
        re.escape("fully_connected_16: X has shape (8,), expected (4,)"),
        xs3.fully_connected_16,
        np.zeros((4, 4), I8),
        np.zeros(8, I8),
        _bso(4),
    )


# --- windows in padding (seed 004) -------------------------------------------------------------


@pytest.mark.parametrize(
    "window, y, what",
    [
        (Window(2, 1, start_row=-2), (1, 1, 4), "start_row + height = -2 + 2 <= 0"),
        (Window(1, 2, start_col=-3), (1, 1, 4), "start_col + width = -3 + 2 <= 0"),
        (Window(1, 1, stride_v=2), (2, 1, 4), "start_row + stride_v*(Y_h-1) = 0 + 2*1 >= X_h = 2"),
        (Window(1, 1, start_col=2), (1, 1, 4), "start_col + stride_h*(Y_w-1) = 2 + 1*0 >= X_w = 2"),
    ],
)
@pytest.mark.parametrize("op", ["conv2d_deep", "conv2d_shallowin", "conv2d_depthwise"])
def test_window_entirely_in_padding(window, y, what, op):
    x = np.zeros((2, 2, 4), I8)
    k = {
        "conv2d_deep": np.zeros((4, window.height, window.width, 4), I8),
        "conv2d_shallowin": np.zeros((4, window.height, 8, 4), I8),
        "conv2d_depthwise": np.zeros((window.height, window.width, 4), I8),
    }[op]
    msg = _raises(re.escape(what), getattr(xs3, op), x, k, _bso(4), _params(window, y))
    assert msg.startswith(f"{op}: a window lies entirely in padding")
    assert "move start_row/start_col or shrink y_params" in msg


# --- conv2d_shallowin ----------------------------------------------------------------------------


def test_shallowin_constraints_name_conv2d_deep():
    bso = _bso(4)
    msg = _raises(
        r"conv2d_shallowin: X_c = 12 is not one of 4, 8, 16, 32",
        xs3.conv2d_shallowin,
        np.zeros((1, 1, 12), I8),
        np.zeros((4, 1, 2, 12), I8),
        bso,
        _params(),
    )
    assert msg.endswith("use conv2d_deep")
    msg = _raises(
        re.escape("conv2d_shallowin: K_w*X_c = 48 > 32 (K_w=3, X_c=16)"),
        xs3.conv2d_shallowin,
        np.zeros((1, 3, 16), I8),
        np.zeros((4, 1, 2, 16), I8),
        bso,
        _params(Window(1, 3)),
    )
    assert msg.endswith("use conv2d_deep")


def test_shallowin_needs_the_augmented_kernel():
    x = np.zeros((1, 3, 8), I8)
    msg = _raises(
        re.escape(
            "K has shape (4, 1, 3, 8), expected (4, 1, 4, 8) (the augmented "
            "kernel (C_out, K_h, 32/X_c = 4, X_c)"
        ),
        xs3.conv2d_shallowin,
        x,
        np.zeros((4, 1, 3, 8), I8),
        _bso(4),
        _params(Window(1, 3)),
    )
    assert "pad each kernel row with zero columns from window.width = 3 to 4" in msg
    k = np.zeros((4, 1, 4, 8), I8)
    k[2, 0, 3, 5] = -7
    _raises(
        re.escape(
            "augmented kernel column 3 >= window.width = 3 is not zero "
            "(K[2, 0, 3, 5] = -7, 1 nonzero value(s)); those columns must be zero"
        ),
        xs3.conv2d_shallowin,
        x,
        k,
        _bso(4),
        _params(Window(1, 3)),
    )


# --- legacy fc ----------------------------------------------------------------------------------


def _legacy(c_out=2, c_in=32, **over):
    args = {
        "W": np.zeros((c_out, c_in), I8),
        "B": np.zeros(c_out, np.int32),
        "X": np.zeros(c_in, I8),
        "shifts": np.zeros(c_out, np.uint16),
        "scales": np.zeros(c_out, np.int16),
    }
    args.update(over)
    return args


@pytest.mark.parametrize(
    "args, match",
    [
        (_legacy(c_in=36), r"C_in = 36 is not a multiple of 32 .* pad W and X with zeros to 64"),
        (_legacy(c_out=17), r"C_out = 17 > 16 .*split the layer or use fully_connected_8/16"),
        (_legacy(B=np.zeros(2, np.int64)), r"B must have dtype int32, got int64"),
        (_legacy(shifts=np.zeros(2, np.int16)), r"shifts must have dtype uint16, got int16"),
        (
            _legacy(scales=np.zeros(3, np.int16)),
            re.escape("scales has shape (3,), expected (2,) (one per output channel"),
        ),
        (
            _legacy(shifts=np.array([0, 40], np.uint16)),
            r"shifts of channel 1 = 40 .* outside 0..31",
        ),
    ],
)
@pytest.mark.parametrize("fn", [xs3.fc_deepin_shallowout_16, xs3.fc_deepin_shallowout_8])
def test_legacy_fc_errors(args, match, fn):
    msg = _raises(match, fn, **args)
    assert msg.startswith(fn.__name__ + ": ")


# --- conformance adapters --------------------------------------------------------------------


def test_adapter_errors():
    run = lookup("xs3", "conv2d_1x1").fn
    ins = {"X": np.zeros((1, 1, 4), I8), "K": np.zeros((4, 4), I8), "BSO": _bso(4)}
    _raises(r"conv2d_1x1 inputs: missing key\(s\) 'BSO'", run, {"X": ins["X"], "K": ins["K"]}, {})
    _raises(r"conv2d_1x1 inputs: unknown key\(s\) 'W'", run, {**ins, "W": ins["K"]}, {})
    _raises(r"model = 'fpga'; choose 'host_reference'", run, ins, {"model": "fpga"})
    deep = lookup("xs3", "conv2d_deep").fn
    ins4 = {"X": ins["X"], "K": np.zeros((4, 1, 1, 4), I8), "BSO": ins["BSO"]}
    _raises(
        r"conv2d_deep attrs: missing key\(s\) 'zero_point'",
        deep,
        ins4,
        {"window": {}, "y_params": {}},
    )


def test_dot_products_too_long_for_an_exact_gemm():
    from quantemu.backends.xs3.bso.accumulation import gemm_dtype
    from quantemu.errors import UnsupportedError

    assert gemm_dtype(1024) is np.float32 and gemm_dtype(1025) is np.float64
    with pytest.raises(UnsupportedError, match=r"a dot product of 549755813888 int8 terms"):
        gemm_dtype(2**39)
