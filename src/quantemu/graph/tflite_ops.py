"""TFLite operators -> IR nodes: one rule per builtin operator (see :mod:`.tflite_import`).

Each rule reads the operator's options and tensors through the builder and appends IR nodes
with ONNX semantics. Geometry follows TFLite exactly: SAME padding puts the odd pixel after
(``ComputePaddingHeightWidth``), pooling never counts padded taps, FULLY_CONNECTED flattens
its input to ``(-1, I)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ops.resize import resized_size
from quantemu.graph.tflite_reader import RESIZE_FLAGS, TfliteOp

if TYPE_CHECKING:
    from quantemu.graph.tflite_import import TfliteGraphBuilder

SAME, VALID = 0, 1
NCHW_AXIS = (0, 2, 3, 1)  # NHWC axis -> NCHW axis


def fused_activation(code: int, op: TfliteOp) -> dict[str, Any]:
    """TFLite's ``ActivationFunctionType`` as the IR's fused-activation attributes."""
    if code == 0:
        return {}
    if code == 1:
        return {"activation": "relu"}
    if code in (2, 3):
        low, high = (-1.0, 1.0) if code == 2 else (0.0, 6.0)
        return {"activation": "clip", "activation_min": low, "activation_max": high}
    names = {4: "TANH", 5: "SIGN_BIT", 6: "SIGMOID"}
    raise UnsupportedError(f"fused activation {names.get(code, code)} is not supported")


def same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite's SAME padding (before, after) of one spatial axis: the odd pixel goes after."""
    out = (size + stride - 1) // stride
    effective = (kernel - 1) * dilation + 1
    total = max(0, (out - 1) * stride + effective - size)
    return total // 2, total - total // 2


def _window(b: TfliteGraphBuilder, op: TfliteOp, x: int, kernel: tuple[int, int]) -> dict[str, Any]:
    o = op.options
    shape = b.tensor(x).shape
    if len(shape) != 4:
        raise InvalidInputError(f"input {b.tensor(x).name!r} must be NHWC, got shape {shape}")
    strides = (int(o["stride_h"]), int(o["stride_w"]))
    dilations = (int(o.get("dilation_h", 1)), int(o.get("dilation_w", 1)))
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if any(e > 2 * size + 1 for e, size in zip(extent, shape[1:3], strict=True)):
        raise InvalidInputError(
            f"a {kernel} window (dilations {dilations}) on a {shape[1:3]} input is implausible "
            "(more than twice the input): the file is corrupt"
        )
    if min(*strides, *dilations, *kernel) < 1:
        raise InvalidInputError(
            f"strides {strides}, dilations {dilations} and window {kernel} must be >= 1"
        )
    if o["padding"] == SAME:
        (t, bo), (le, r) = (
            same_padding(shape[1 + i], kernel[i], strides[i], dilations[i]) for i in range(2)
        )
    elif o["padding"] == VALID:
        t = bo = le = r = 0
    else:
        raise UnsupportedError(f"padding {o['padding']} is neither SAME nor VALID")
    return {
        "kernel_shape": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": (t, le, bo, r),
    }


def _conv(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x, w, bias = (*op.inputs, -1, -1)[:3]
    wt = b.tensor(w)
    if wt.data is None or len(wt.shape) != 4:
        raise UnsupportedError(f"the filter {wt.name!r} must be a constant OHWI tensor")
    c_in = b.tensor(x).shape[3]
    if wt.shape[3] != c_in:
        raise UnsupportedError(
            f"grouped convolution (input has {c_in} channels, filter {wt.shape}) is not supported"
        )
    attrs = _window(b, op, x, (wt.shape[1], wt.shape[2]))
    weights = b.constant(w, lambda a: a.transpose(0, 3, 1, 2), {0: 0})
    inputs = [b.value(x, "nchw"), weights] + ([b.constant(bias)] if bias >= 0 else [])
    attrs |= {"group": 1, **fused_activation(op.options["activation"], op)}
    b.add(op, "Conv", inputs, [b.output(op.outputs[0], "nchw")], attrs)


def _depthwise(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x, w, bias = (*op.inputs, -1, -1)[:3]
    wt = b.tensor(w)
    c_in = b.tensor(x).shape[3]
    if wt.data is None or len(wt.shape) != 4 or wt.shape[0] != 1 or wt.shape[3] % c_in:
        raise UnsupportedError(
            f"the depthwise filter {wt.name!r} must be a constant 1HWC tensor with a multiple of "
            f"the {c_in} input channels, got {wt.shape}"
        )
    attrs = _window(b, op, x, (wt.shape[1], wt.shape[2]))
    weights = b.constant(w, lambda a: a.transpose(3, 0, 1, 2), {3: 0})
    inputs = [b.value(x, "nchw"), weights] + ([b.constant(bias)] if bias >= 0 else [])
    attrs |= {"group": c_in, **fused_activation(op.options["activation"], op)}
    b.add(op, "Conv", inputs, [b.output(op.outputs[0], "nchw")], attrs)


def _fully_connected(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x, w, bias = (*op.inputs, -1, -1)[:3]
    o = op.options
    wt = b.tensor(w)
    if o.get("weights_format", 0) != 0 or wt.data is None or len(wt.shape) != 2:
        raise UnsupportedError("only constant (O, I) weights in the DEFAULT format are supported")
    out_shape = b.tensor(op.outputs[0]).shape
    source = b.value(x, "nhwc")
    if len(b.tensor(x).shape) != 2:  # TFLite flattens the input to (-1, I)
        flat = b.unique(f"{b.tensor(x).name}/flat")
        b.add(
            op,
            "Reshape",
            [source],
            [flat],
            {"shape": (-1, wt.shape[1]), "allowzero": 0},
            suffix="/flatten",
        )
        if source in b.overrides:
            b.overrides[flat] = b.overrides[source]
        source = flat
    inputs = [source, b.constant(w)] + ([b.constant(bias)] if bias >= 0 else [])
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1}
    attrs |= fused_activation(o["activation"], op)
    if len(out_shape) == 2:
        b.add(op, "Gemm", inputs, [b.output(op.outputs[0])], attrs)
        return
    # keep_num_dims: the (-1, O) product reshaped to the output's leading dimensions, on the
    # output's quantization (a move of codes)
    out = b.output(op.outputs[0], "nhwc")
    flat_out = b.unique(f"{out}/flat")
    if out in b.overrides:
        b.overrides[flat_out] = b.overrides[out]
    b.add(op, "Gemm", inputs, [flat_out], attrs)
    shape = {"shape": (-1, *out_shape[1:]), "allowzero": 0}
    b.add(op, "Reshape", [flat_out], [out], shape, suffix="/unflatten")


def _batch_matmul(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    """BATCH_MATMUL: MatMul, adj_x / adj_y as a Transpose of the operand's last two axes (on
    the operand's quantization: a move of codes)."""
    inputs = []
    for i, adj in zip(op.inputs[:2], ("adj_x", "adj_y"), strict=True):
        source = b.value(i, "nhwc")
        rank = len(b.tensor(i).shape)
        if op.options.get(adj):
            moved = b.unique(f"{b.tensor(i).name}/{adj}")
            perm = (*range(rank - 2), rank - 1, rank - 2)
            b.add(op, "Transpose", [source], [moved], {"perm": perm}, suffix=f"/{adj}")
            if source in b.overrides:
                b.overrides[moved] = b.overrides[source]
            source = moved
        inputs.append(source)
    b.add(op, "MatMul", inputs, [b.output(op.outputs[0], "nhwc")])


def _elementwise_layout(b: TfliteGraphBuilder, op: TfliteOp) -> str | None:
    for i in op.inputs:
        layout = b.layout_of(i) if i >= 0 and b.tensor(i).data is None else None
        if layout:
            return layout
    return None


def _operand(b: TfliteGraphBuilder, index: int, layout: str | None) -> str:
    """An elementwise operand; a constant is brought to rank 4 and the layout when needed."""
    t = b.tensor(index)
    if t.data is None or layout != "nchw":
        return b.value(index, layout)

    def to_nchw(a: np.ndarray) -> np.ndarray:
        return a.reshape((1,) * (4 - a.ndim) + a.shape).transpose(0, 3, 1, 2)

    rank = len(t.shape)
    axis_map = {a: NCHW_AXIS[a + 4 - rank] for a in range(rank)}
    return b.constant(index, to_nchw, axis_map)


def _binary(op_type: str) -> Callable[[TfliteGraphBuilder, TfliteOp], None]:
    def rule(b: TfliteGraphBuilder, op: TfliteOp) -> None:
        layout = _elementwise_layout(b, op)
        inputs = [_operand(b, i, layout) for i in op.inputs[:2]]
        attrs = fused_activation(op.options.get("activation", 0), op)
        b.add(op, op_type, inputs, [b.output(op.outputs[0], layout)], attrs)

    return rule


def _pool(op_type: str) -> Callable[[TfliteGraphBuilder, TfliteOp], None]:
    def rule(b: TfliteGraphBuilder, op: TfliteOp) -> None:
        o = op.options
        attrs = _window(b, op, op.inputs[0], (int(o["filter_h"]), int(o["filter_w"])))
        attrs |= {"ceil_mode": 0}
        if op_type == "AveragePool":
            attrs["count_include_pad"] = 0  # TFLite divides by the in-image taps
        act = fused_activation(o.get("activation", 0), op)
        x = b.value(op.inputs[0], "nchw")
        out = b.output(op.outputs[0], "nchw")
        if not act:
            b.add(op, op_type, [x], [out], attrs)
            return
        # A pool has no fused-activation slot in the IR: clamp in a second node on the same
        # quantization (TFLite clamps the pooled codes to the activation's range).
        pooled = b.unique(f"{out}/pooled")
        b.add(op, op_type, [x], [pooled], attrs)
        if out in b.overrides:
            b.overrides[pooled] = b.overrides[out]
        b.layouts[pooled] = "nchw"
        clip = {"min": act.get("activation_min", 0.0), "max": act.get("activation_max", np.inf)}
        b.add(op, "Clip", [pooled], [out], clip, suffix="/activation")

    return rule


def _axis(b: TfliteGraphBuilder, index: int, axis: int, layout: str | None) -> int:
    rank = len(b.tensor(index).shape)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise InvalidInputError(f"axis {axis} is out of range for rank {rank}")
    return NCHW_AXIS[axis] if layout == "nchw" else axis


def _mean(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x = op.inputs[0]
    layout = b.layout_of(x)
    keep = bool(op.options.get("keep_dims", False))
    if not keep and layout == "nchw":
        layout = "nhwc"  # dropping axes of an NCHW value would scramble the NHWC meaning
    axes = sorted({_axis(b, x, a, layout) for a in b.ints(op.inputs[1], "MEAN's axes")})
    attrs = {"axes": tuple(axes), "keepdims": int(keep)}
    out_layout = layout if keep else None
    b.add(op, "ReduceMean", [b.value(x, layout)], [b.output(op.outputs[0], out_layout)], attrs)


def _reshape(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    out = b.tensor(op.outputs[0])
    shape = (-1, *out.shape[1:]) if out.shape else ()
    attrs = {"shape": shape, "allowzero": 0}
    b.add(op, "Reshape", [b.value(op.inputs[0], "nhwc")], [b.output(op.outputs[0], "nhwc")], attrs)


def _transpose(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    """TRANSPOSE with a constant permutation, on the tensors' own (TFLite) axis order."""
    perm = tuple(b.ints(op.inputs[1], "TRANSPOSE's permutation"))
    x, out = b.value(op.inputs[0], "nhwc"), b.output(op.outputs[0], "nhwc")
    b.add(op, "Transpose", [x], [out], {"perm": perm})


def _pad(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x = op.inputs[0]
    rank = len(b.tensor(x).shape)
    amounts = b.ints(op.inputs[1], "PAD's paddings")
    if len(amounts) != 2 * rank:
        raise InvalidInputError(f"paddings {amounts} do not match the input's rank {rank}")
    if amounts[0] or amounts[1]:
        raise UnsupportedError(f"padding the batch axis ({amounts[:2]}) is not supported")
    layout = b.layout_of(x)
    begins, ends = list(amounts[0::2]), list(amounts[1::2])
    if layout == "nchw":
        begins, ends = ([v[a] for a in (0, 3, 1, 2)] for v in (begins, ends))
    value = 0.0
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        c = b.tensor(op.inputs[2])
        q = c.quant
        raw = float(np.asarray(c.data).reshape(-1)[0])
        value = (raw - float(q.zero_point[0])) * float(q.scale[0]) if q is not None else raw
    attrs = {"pads": (*begins, *ends), "mode": "constant", "value": value}
    b.add(op, "Pad", [b.value(x, layout)], [b.output(op.outputs[0], layout)], attrs)


def _concat(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    layout = _elementwise_layout(b, op)
    axis = _axis(b, op.outputs[0], int(op.options["axis"]), layout)
    if fused_activation(op.options.get("activation", 0), op):
        raise UnsupportedError("CONCATENATION with a fused activation is not supported")
    inputs = [_operand(b, i, layout) for i in op.inputs]
    b.add(op, "Concat", inputs, [b.output(op.outputs[0], layout)], {"axis": axis})


def _softmax(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x = op.inputs[0]
    layout = b.layout_of(x)
    axis = _axis(b, x, -1, layout)
    attrs = {"axis": axis, "coerce_2d": 0, "beta": float(op.options.get("beta", 1.0))}
    b.add(op, "Softmax", [b.value(x, layout)], [b.output(op.outputs[0], layout)], attrs)


def _unary(op_type: str, attrs: dict[str, Any] | None = None) -> Callable:
    def rule(b: TfliteGraphBuilder, op: TfliteOp) -> None:
        x = op.inputs[0]
        layout = b.layout_of(x)
        extra = dict(attrs or {})
        if op.name == "LEAKY_RELU":
            extra["alpha"] = float(op.options.get("alpha", 0.2))
        b.add(op, op_type, [b.value(x, layout)], [b.output(op.outputs[0], layout)], extra)

    return rule


def _quantize(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    """QUANTIZE: float -> int8, or a requantization: a Clip to the output's range."""
    out = b.tensor(op.outputs[0])
    q = out.quant
    if q is None or out.dtype not in ("int8", "uint8", "int16"):
        raise UnsupportedError(f"QUANTIZE to {out.dtype} is not supported")
    info = np.iinfo(out.dtype)
    scale, zero = float(q.scale[0]), int(q.zero_point[0])
    attrs = {"min": (info.min - zero) * scale, "max": (info.max - zero) * scale}
    x = op.inputs[0]
    layout = b.layout_of(x)
    b.add(op, "Clip", [b.value(x, layout)], [b.output(op.outputs[0], layout)], attrs)


#: TFLite's resize flags (align_corners, half_pixel_centers) -> the ONNX coordinate mode and
#: rounding that read the same source pixels: the reference kernels map output x to
#: ``(x + 0.5 if half_pixel_centers else x) * scale``, with scale ``(in-1)/(out-1)`` under
#: align_corners (else ``in/out``), and nearest rounds that half away from zero under
#: align_corners, else down; bilinear's half_pixel_centers also subtracts 0.5 (half_pixel).
_RESIZE_MODES = {
    ("nearest", False, False): ("asymmetric", "floor"),
    ("nearest", True, False): ("align_corners", "round_prefer_ceil"),
    ("nearest", False, True): ("tf_half_pixel_for_nn", "floor"),
    ("linear", False, False): ("asymmetric", "floor"),
    ("linear", True, False): ("align_corners", "floor"),
    ("linear", False, True): ("half_pixel", "floor"),
}


def _resize(mode: str) -> Callable[[TfliteGraphBuilder, TfliteOp], None]:
    def rule(b: TfliteGraphBuilder, op: TfliteOp) -> None:
        """RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR of NHWC H and W to the constant size."""
        x, flags = op.inputs[0], (bool(op.options.get(k)) for k in RESIZE_FLAGS)
        key = (mode, *flags)
        if key not in _RESIZE_MODES:
            raise UnsupportedError(
                "align_corners together with half_pixel_centers has no ONNX Resize "
                "equivalent (TensorFlow's converter does not write it)"
            )
        shape = b.tensor(x).shape
        size = b.ints(op.inputs[1], f"{op.name}'s size")
        if len(shape) != 4 or len(size) != 2 or min(size) < 1:
            raise InvalidInputError(f"size {size} does not resize the NHWC input {shape}")
        coord, nearest = _RESIZE_MODES[key]
        scales = (1.0, 1.0, *(_exact_scale(i, o) for i, o in zip(shape[1:3], size, strict=True)))
        attrs = {"mode": mode, "coordinate_transformation_mode": coord, "nearest_mode": nearest}
        attrs |= {"scales": scales, "sizes": ()}
        # a symbolic batch has no place in ``sizes``: the scales give H and W exactly
        b.add(op, "Resize", [b.value(x, "nchw")], [b.output(op.outputs[0], "nchw")], attrs)

    return rule


def _exact_scale(size_in: int, size_out: int) -> float:
    """``size_out / size_in``, raised by one float32 ulp where the IR's output size
    (:func:`resized_size`, in float32) would fall short of ``size_out`` by rounding."""
    scale = size_out / size_in
    if resized_size(size_in, scale) < size_out:
        scale = float(np.nextafter(np.float32(scale), np.float32(np.inf)))
    return scale


def _prelu(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    """PRELU with a constant alpha, broadcast against the input as the file's layout says."""
    x, alpha = op.inputs[:2]
    if b.tensor(alpha).data is None:
        raise UnsupportedError("PRELU with an alpha computed at run time is not supported")
    layout = b.layout_of(x)
    inputs = [b.value(x, layout), _operand(b, alpha, layout)]
    b.add(op, "PRelu", inputs, [b.output(op.outputs[0], layout)])


def _dequantize(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    x = op.inputs[0]
    layout = b.layout_of(x)
    b.add(op, "Identity", [b.value(x, layout)], [b.output(op.outputs[0], layout)])


BUILTINS: dict[str, Callable[[TfliteGraphBuilder, TfliteOp], None]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "BATCH_MATMUL": _batch_matmul,
    "ADD": _binary("Add"),
    "SUB": _binary("Sub"),
    "MUL": _binary("Mul"),
    "SQUARED_DIFFERENCE": _binary("SquaredDifference"),
    "MINIMUM": _binary("Min"),
    "MAXIMUM": _binary("Max"),
    "RSQRT": _unary("Rsqrt"),
    "MAX_POOL_2D": _pool("MaxPool"),
    "AVERAGE_POOL_2D": _pool("AveragePool"),
    "MEAN": _mean,
    "RESHAPE": _reshape,
    "TRANSPOSE": _transpose,
    "PAD": _pad,
    "PADV2": _pad,
    "CONCATENATION": _concat,
    "SOFTMAX": _softmax,
    "LOGISTIC": _unary("Sigmoid"),
    "TANH": _unary("Tanh"),
    "RELU": _unary("Relu"),
    "RELU6": _unary("Clip", {"min": 0.0, "max": 6.0}),
    "RELU_N1_TO_1": _unary("Clip", {"min": -1.0, "max": 1.0}),
    "LEAKY_RELU": _unary("LeakyRelu"),
    "HARD_SWISH": _unary("HardSwish"),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "RESIZE_NEAREST_NEIGHBOR": _resize("nearest"),
    "RESIZE_BILINEAR": _resize("linear"),
    "PRELU": _prelu,
}


def convert_custom(b: TfliteGraphBuilder, op: TfliteOp) -> None:
    """A custom operator (an XMOS ``XC_`` op of a compiled model) as a ``TfliteCustom`` node.

    Activation inputs keep NHWC (the XC_ ops' own layout); constant inputs (weights, the int16
    multiplier/bias tensors, scratch) become initializers of their own dtypes.
    """
    if not op.custom_code.startswith("XC_"):
        raise UnsupportedError(
            f"custom operator {op.custom_code!r} is not supported (only XMOS's XC_ operators)"
        )
    inputs = []
    for i in op.inputs:
        if i < 0:
            inputs.append("")
        elif not b.is_activation(i):  # weights, int16 parameters, scratch
            inputs.append(b.raw_constant(i))
        else:
            inputs.append(b.value(i, "nhwc"))
    outs = [b.tensor(i) for i in op.outputs]
    batch_input = next((k for k, i in enumerate(op.inputs) if i >= 0 and b.is_activation(i)), -1)
    attrs = {
        "batch_input": batch_input,
        "custom_code": op.custom_code,
        "custom_options": op.custom_options,
        "output_shapes": tuple(t.shape for t in outs),
        "output_dtypes": tuple(t.dtype for t in outs),
    }
    b.add(op, "TfliteCustom", inputs, [b.output(i, "nhwc") for i in op.outputs], attrs)
