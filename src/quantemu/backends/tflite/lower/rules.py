"""The ``tflite`` rule table: graph op type -> a layer running TFLite's int8 reference kernel.

Each rule is ``rule(ctx, node) -> Layer`` (:mod:`quantemu.program.lowering`). There is no float
fallback: an operator TFLite has no int8 kernel for, or a form of one it cannot take, is an
:class:`~quantemu.errors.UnsupportedError` naming it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantemu.backends.refusals import recurrent_refusals
from quantemu.backends.tflite.activation_params import (
    hard_swish_params,
    leaky_relu_params,
    logistic_params,
    relu_params,
    softmax_params,
    tanh_params,
)
from quantemu.backends.tflite.batch_matmul import MAX_RANK, batch_matmul_params
from quantemu.backends.tflite.gelu import gelu_params
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.elementwise import (
    lower_binary,
    lower_min_max,
    lower_squared_difference,
)
from quantemu.backends.tflite.lower.layers import (
    ActivationLayer,
    BatchMatMulLayer,
    ConcatLayer,
    ConvLayer,
    FullyConnectedLayer,
    MeanLayer,
    MoveLayer,
    PadLayer,
    PoolLayer,
    RequantizeLayer,
)
from quantemu.backends.tflite.lower.prelu import lower_prelu
from quantemu.backends.tflite.lower.resize import lower_resize
from quantemu.backends.tflite.lower.transpose_conv import lower_conv_transpose
from quantemu.backends.tflite.params import (
    FusedActivation,
    TfliteRuntime,
    conv_params,
    fully_connected_params,
    mean_params,
    pool_params,
    requantize_params,
)
from quantemu.backends.tflite.quantize import quantize_scalar
from quantemu.backends.tflite.rsqrt import rsqrt_params
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.lowering import NotLowerable, RuleTable

#: Ops that move codes without arithmetic (Squeeze/Unsqueeze are RESHAPEs in TFLite).
MOVE_OPS = ("Reshape", "Transpose", "Flatten", "Identity", "Dropout", "Squeeze", "Unsqueeze")
#: Gather / Slice / Expand select or repeat codes: GATHER, STRIDED_SLICE, BROADCAST_TO keep the
#: input's quantization in TFLite.
SELECT_OPS = {"Gather": "GATHER", "Slice": "STRIDED_SLICE", "Expand": "BROADCAST_TO"}
MOVE_OPS += tuple(SELECT_OPS)


def lower_conv(ctx: TfliteContext, node: Node) -> Layer:
    """Conv: CONV_2D (group 1) or DEPTHWISE_CONV_2D (group = input channels)."""
    a = node.attrs
    x = node.inputs[0]
    c_in = ctx.shape(x)[1]
    group = int(a["group"])
    w_shape = ctx.constant(node, 1, "weight").shape
    depthwise = group > 1 and group == c_in and w_shape[1] == 1
    if group != 1 and not depthwise:
        raise NotLowerable(f"grouped convolution ({group} groups) has no TFLite int8 kernel")
    e_in, e_out = ctx.encoding(x), ctx.encoding(node.outputs[0])
    codes, s_w = ctx.weights(node, 1, axis=0)
    bias = ctx.bias(node, 2, e_in.scale, s_w)
    params = conv_params(e_in.scale, e_in.zero_point, s_w, e_out.scale, e_out.zero_point)
    op = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    return ctx.layer(
        ConvLayer,
        node,
        op=op,
        inputs=(x,),
        weights=np.ascontiguousarray(codes, np.int8),
        bias=bias,
        params=ctx.with_fused_activation(params, node, e_out),
        strides=tuple(a["strides"]),
        dilations=tuple(a["dilations"]),
        pads=tuple(a["pads"]),
        depthwise=depthwise,
        encoding=e_out,
    )


def lower_dense(ctx: TfliteContext, node: Node) -> Layer:
    """Gemm / MatMul with constant weights: FULLY_CONNECTED."""
    a = node.attrs
    if node.op_type == "Gemm" and (a["alpha"] != 1.0 or a["beta"] != 1.0 or a["transA"]):
        raise NotLowerable("Gemm with alpha/beta != 1 or a transposed A")
    x = node.inputs[0]
    if len(ctx.shape(x)) != 2:
        raise NotLowerable(f"input of rank {len(ctx.shape(x))} (FULLY_CONNECTED takes (N, I))")
    trans_b = bool(a.get("transB", 0))
    e_in, e_out = ctx.encoding(x), ctx.encoding(node.outputs[0])
    codes, s_w = ctx.weights(node, 1, axis=0 if trans_b else 1)
    codes = codes if trans_b else codes.T
    bias = ctx.bias(node, 2, e_in.scale, s_w) if node.op_type == "Gemm" else None
    # XMOS's TFLite-Micro runs per-channel FC weights with channel 0's scale (options.py)
    scales = s_w[:1] if ctx.options.fc_first_channel_scale else s_w
    params = fully_connected_params(
        e_in.scale,
        e_in.zero_point,
        scales,
        e_out.scale,
        e_out.zero_point,
        runtime=ctx.options.kernel_runtime,
    )
    return ctx.layer(
        FullyConnectedLayer,
        node,
        op="FULLY_CONNECTED",
        inputs=(x,),
        weights=np.ascontiguousarray(codes, np.int8),
        bias=bias,
        params=ctx.with_fused_activation(params, node, e_out),
        encoding=e_out,
    )


def lower_matmul(ctx: TfliteContext, node: Node) -> Layer:
    """MatMul: FULLY_CONNECTED when the second operand is a constant weight, else
    BATCH_MATMUL of two activations (attention's ``q @ k^T``, ``p @ v``)."""
    a, b = node.inputs[:2]
    if ctx.const(b) is not None:
        return lower_dense(ctx, node)
    if ctx.const(a) is not None:
        raise NotLowerable(
            f"a constant first operand ({a}) times an activation: BATCH_MATMUL here takes two "
            "activations; transpose the product so the constant is the second operand"
        )
    if "BATCH_MATMUL" in ctx.options.missing_builtins:
        raise NotLowerable(
            "both operands are activations (BATCH_MATMUL) and XMOS's runtime (xmos-ai-tools "
            "1.4.2) registers no BATCH_MATMUL kernel; runtime 'tflite_micro' or "
            "'litert_reference' runs it"
        )
    ranks = (len(ctx.shape(a)), len(ctx.shape(b)))
    if not all(2 <= r <= MAX_RANK for r in ranks):
        raise NotLowerable(f"operand ranks {ranks} (BATCH_MATMUL takes ranks 2 to {MAX_RANK})")
    (e_a, e_b), e_out = (ctx.encoding(n) for n in (a, b)), ctx.encoding(node.outputs[0])
    params = batch_matmul_params(
        e_a.scale, e_a.zero_point, e_b.scale, e_b.zero_point, e_out.scale, e_out.zero_point
    )
    return ctx.layer(
        BatchMatMulLayer, node, op="BATCH_MATMUL", inputs=(a, b), params=params, encoding=e_out
    )


def lower_pool(ctx: TfliteContext, node: Node) -> Layer:
    """MaxPool / AveragePool: MAX_POOL_2D / AVERAGE_POOL_2D (output on the input's scale)."""
    a = node.attrs
    if tuple(a["dilations"]) != (1, 1):
        raise NotLowerable("dilation (TFLite pools have none)")
    average = node.op_type == "AveragePool"
    if average and a["count_include_pad"] and (any(a["pads"]) or a["ceil_mode"]):
        raise NotLowerable("count_include_pad with padding (TFLite divides by in-image taps)")
    pads = tuple(a["pads"])
    if a["ceil_mode"]:
        # ceil_mode's extra window is padding after the image: TFLite's kernels skip
        # out-of-image taps, so a max (or an in-image average) over it is what ONNX computes.
        pads = _ceil_pads(ctx, node, pads)
    enc = ctx.same_as_input(node)
    params = pool_params(enc.scale, enc.zero_point)
    return ctx.layer(
        PoolLayer,
        node,
        op="AVERAGE_POOL_2D" if average else "MAX_POOL_2D",
        average=average,
        kernel=tuple(a["kernel_shape"]),
        strides=tuple(a["strides"]),
        pads=pads,
        params=ctx.with_fused_activation(params, node, enc),
        encoding=enc,
    )


def _ceil_pads(ctx: TfliteContext, node: Node, pads: tuple) -> tuple[int, int, int, int]:
    """``pads`` grown at the bottom and right so a floor-mode window walk gives the graph's
    (ceil-mode) output size."""
    (kh, kw), (sh, sw) = node.attrs["kernel_shape"], node.attrs["strides"]
    _, _, h, w = ctx.shape(node.inputs[0])
    _, _, oh, ow = ctx.shape(node.outputs[0])
    if not all(isinstance(d, int) for d in (h, w, oh, ow)):
        raise NotLowerable("ceil_mode with unknown spatial sizes")
    top, left, bottom, right = pads
    bottom = max(bottom, (oh - 1) * sh + kh - h - top)
    right = max(right, (ow - 1) * sw + kw - w - left)
    return (top, left, bottom, right)


def lower_mean(ctx: TfliteContext, node: Node) -> Layer:
    """ReduceMean / GlobalAveragePool: MEAN."""
    if node.op_type == "GlobalAveragePool":
        axes, keep = tuple(range(2, len(ctx.shape(node.inputs[0])))), True
    else:
        axes, keep = tuple(node.attrs["axes"]), bool(node.attrs["keepdims"])
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    params = mean_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point)
    return ctx.layer(
        MeanLayer,
        node,
        op="MEAN",
        axes=axes,
        keepdims=keep,
        params=params,
        runtime=ctx.options.kernel_runtime,
        encoding=e_out,
    )


def lower_move(ctx: TfliteContext, node: Node) -> Layer:
    """Reshape, Transpose, Flatten, Identity, Dropout: the codes moved, quantization kept."""
    enc = ctx.same_as_input(node)
    if enc != ctx.encoding(node.inputs[0]):
        raise UnsupportedError(
            f"{node}: moves codes unchanged but the model quantizes its output as "
            f"{enc.describe()} and its input as {ctx.encoding(node.inputs[0]).describe()}"
        )
    op = "TRANSPOSE" if node.op_type == "Transpose" else "RESHAPE"
    op = "IDENTITY" if node.op_type in ("Identity", "Dropout") else op
    op = SELECT_OPS.get(node.op_type, op)
    fields = {"op_type": node.op_type, "attrs": node.attrs, "encoding": enc}
    return ctx.layer(MoveLayer, node, op=op, inputs=node.inputs[:1], **fields)


def lower_pad(ctx: TfliteContext, node: Node) -> Layer:
    """Pad (constant mode): PAD / PADV2 with the value's code."""
    enc = ctx.same_as_input(node)
    pads = tuple(node.attrs["pads"])
    rank = len(pads) // 2
    fill = quantize_scalar(float(node.attrs["value"]), enc.scale, int(enc.zero_point))
    if not -128 <= fill <= 127:
        raise UnsupportedError(f"{node}: the pad value {node.attrs['value']} is outside int8")
    pairs = tuple(zip(pads[:rank], pads[rank:], strict=True))
    return ctx.layer(PadLayer, node, op="PAD", pads=pairs, fill=fill, encoding=enc)


def lower_concat(ctx: TfliteContext, node: Node) -> Layer:
    """Concat: CONCATENATION, requantizing inputs on another quantization (a QUANTIZE)."""
    e_out = ctx.encoding(node.outputs[0])
    params = []
    for name in node.inputs:
        if ctx.const(name) is not None:
            raise NotLowerable("a constant input of Concat")
        e = ctx.encoding(name)
        same = (e.scale, int(e.zero_point)) == (e_out.scale, int(e_out.zero_point))
        params.append(
            None
            if same
            else requantize_params(e.scale, e.zero_point, e_out.scale, e_out.zero_point)
        )
    fields = {"axis": int(node.attrs["axis"]), "params": tuple(params), "encoding": e_out}
    return ctx.layer(ConcatLayer, node, op="CONCATENATION", **fields)


def lower_clip(ctx: TfliteContext, node: Node) -> Layer:
    """Clip / Relu on codes: QUANTIZE (a requantization) clamped to the activation's range."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    if node.op_type == "Relu":
        attrs = {"activation": "relu"}
    else:
        lo, hi = float(node.attrs["min"]), float(node.attrs["max"])
        attrs = {"activation": "clip", "activation_min": lo, "activation_max": hi}
    low, high = ctx.activation(dataclasses.replace(node, attrs=node.attrs.merged(**attrs)), e_out)
    params = requantize_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point)
    op = node.attrs.get("tflite_op", "QUANTIZE" if node.op_type == "Clip" else "RELU")
    return ctx.layer(
        RequantizeLayer, node, op=op, params=params, low=low, high=high, encoding=e_out
    )


STANDARD_RELU = {(0.0, 6.0): FusedActivation.RELU6, (-1.0, 1.0): FusedActivation.RELU_N1_TO_1}


def lower_relu(ctx: TfliteContext, node: Node) -> Layer:
    """Relu, and Clip with ReLU6 / ReLU-N1-to-1 bounds: the runtime's RELU kernels; any other
    Clip (a QUANTIZE, or a general clamp) requantizes and clamps (:func:`lower_clip`)."""
    if node.op_type == "Relu":
        kind = FusedActivation.RELU
    else:
        kind = STANDARD_RELU.get((float(node.attrs["min"]), float(node.attrs["max"])))
        if kind is None or node.attrs.get("tflite_op") == "QUANTIZE":
            return lower_clip(ctx, node)
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    args = (e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point)
    params = relu_params(kind, *args, runtime=ctx.options.kernel_runtime)
    return ctx.layer(
        ActivationLayer, node, op=kind.value, kind="relu", params=params, encoding=e_out
    )


def lower_activation(ctx: TfliteContext, node: Node) -> Layer:
    """LeakyRelu, HardSwish, Sigmoid, Tanh: LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.output_encoding(node)
    runtime = ctx.options.kernel_runtime
    si, zi, so, zo = e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point
    if node.op_type == "LeakyRelu":
        kind, op = "leaky_relu", "LEAKY_RELU"
        params = leaky_relu_params(si, zi, so, zo, node.attrs["alpha"], runtime=runtime)
    elif node.op_type == "HardSwish":
        kind, op = "hard_swish", "HARD_SWISH"
        params = hard_swish_params(si, zi, so, zo, runtime=runtime)
    elif node.op_type == "Sigmoid":
        kind, op = "logistic", "LOGISTIC"
        params = logistic_params(si, zi, so, zo, runtime=runtime)
    else:
        kind, op = "tanh", "TANH"
        params = tanh_params(si, zi, so, zo, runtime=runtime)
    return ctx.layer(ActivationLayer, node, op=op, kind=kind, params=params, encoding=e_out)


def lower_gelu(ctx: TfliteContext, node: Node) -> Layer:
    """Gelu: GELU, LiteRT's Prepare-time table (TFLite-Micro has no GELU kernel)."""
    if ctx.options.kernel_runtime is not TfliteRuntime.LITERT_REFERENCE:
        raise NotLowerable("GELU: the installed TFLite-Micro registers no GELU kernel")
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.output_encoding(node)
    params = gelu_params(
        e_in.scale,
        e_in.zero_point,
        e_out.scale,
        e_out.zero_point,
        approximate=str(node.attrs.get("approximate", "none")),
    )
    return ctx.layer(ActivationLayer, node, op="GELU", kind="gelu", params=params, encoding=e_out)


def lower_rsqrt(ctx: TfliteContext, node: Node) -> Layer:
    """Rsqrt: RSQRT (LiteRT and TFLite-Micro run the same int8 kernel, tabulated at Prepare)."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    params = rsqrt_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point)
    return ctx.layer(ActivationLayer, node, op="RSQRT", kind="rsqrt", params=params, encoding=e_out)


def lower_softmax(ctx: TfliteContext, node: Node) -> Layer:
    """Softmax over one axis (opset >= 13 semantics): SOFTMAX, gemmlowp's fixed point."""
    if node.attrs.get("coerce_2d") and node.attrs["axis"] != len(ctx.shape(node.inputs[0])) - 1:
        raise NotLowerable("opset < 13 Softmax over several axes")
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.output_encoding(node)
    beta = float(node.attrs.get("beta", 1.0))
    params = softmax_params(
        e_in.scale, beta, e_out.scale, e_out.zero_point, runtime=ctx.options.kernel_runtime
    )
    return ctx.layer(
        ActivationLayer,
        node,
        op="SOFTMAX",
        kind="softmax",
        params=params,
        encoding=e_out,
        axis=int(node.attrs["axis"]),
    )


def unsupported(ctx: TfliteContext, node: Node, why: str) -> UnsupportedError:
    """The error for an op with no TFLite int8 kernel (there is no float fallback)."""
    reason = f" ({why})" if why else ""
    return UnsupportedError(
        f"{node}: operator {node.op_type!r} has no TFLite int8 reference kernel here{reason}; "
        f"supported operators: {', '.join(RULES.supported())}"
    )


#: Why ONNX Pad in mode reflect or edge (the IR's BorderPad) does not run on TFLite targets.
BORDER_PAD_REFUSAL = (
    "Pad with mode reflect or edge: TFLite's converter writes reflect as MIRROR_PAD (mode "
    "REFLECT), whose int8 kernel is not emulated yet, and TFLite has no edge padding at all "
    "(MIRROR_PAD offers only REFLECT and SYMMETRIC); pad with a constant, or run the layer on "
    "the host"
)

RULES: RuleTable[TfliteContext] = RuleTable(
    rules={
        "Conv": lower_conv,
        "ConvTranspose": lower_conv_transpose,
        "Gemm": lower_dense,
        "MatMul": lower_matmul,
        "Add": lower_binary,
        "Sub": lower_binary,
        "Mul": lower_binary,
        "SquaredDifference": lower_squared_difference,
        "Rsqrt": lower_rsqrt,
        "Min": lower_min_max,
        "Max": lower_min_max,
        "MaxPool": lower_pool,
        "AveragePool": lower_pool,
        "GlobalAveragePool": lower_mean,
        "ReduceMean": lower_mean,
        "Pad": lower_pad,
        "Resize": lower_resize,
        "Concat": lower_concat,
        "Clip": lower_relu,
        "Relu": lower_relu,
        "LeakyRelu": lower_activation,
        "PRelu": lower_prelu,
        "HardSwish": lower_activation,
        "Sigmoid": lower_activation,
        "Tanh": lower_activation,
        "Softmax": lower_softmax,
        "Gelu": lower_gelu,
        **dict.fromkeys(MOVE_OPS, lower_move),
    },
    unsupported=unsupported,
    refused={**recurrent_refusals("tflite"), "BorderPad": BORDER_PAD_REFUSAL},
)
