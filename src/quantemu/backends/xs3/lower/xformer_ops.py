"""xcore-opt 1.4.2's rewrites of the int8 operators other than convolutions.

- ADD / SUB -> ``XC_add`` (:mod:`..xformer.add`); a fused RELU / RELU6 is split out into
  ``XC_lookup`` on the output's quantization, whatever its zero point (``TFLPatterns.td``
  unfuses binary ops' activations unconditionally). Broadcast operands are copied first
  (``XC_broadcast``), which NumPy broadcasting reproduces. (MUL -> ``XC_mul`` is not handled here.)
- RELU, RELU6, TANH, LOGISTIC, HARD_SWISH, LEAKY_RELU and an int8 -> int8 QUANTIZE ->
  ``XC_lookup`` (:mod:`..xformer.lookup`).
- MEAN over axes contiguous in the TFLite (NHWC) tensor -> ``XC_mean``'s float32 path
  (:mod:`..xformer.mean`); other axes keep TFLite-Micro's MEAN.
- AVERAGE_POOL_2D -> a depthwise ``XC_conv2d_v2`` with every weight 1 and the filter scale
  ``float32(1 / (kh * kw))`` (``ReplaceAvgPoolWithConv2D.cpp``); SAME borders use the full
  window over zero-point padding (``XC_pad``), unlike TFLite. With channels not a multiple of
  4, or above the OT error threshold, the conv stays TFLite's DEPTHWISE_CONV_2D with those
  weights (still after the ``XC_pad``: checked on 1.4.2 with 3 channels). Its
  fused activation (a separate Clip node in the IR) follows the conv rule: ignored when the
  output zero point is -128, else an ``XC_lookup`` (TFLite's clamp when the conv stays TFLite's).
- MAX_POOL_2D -> ``XC_maxpool2d``: the max of the raw codes over the window after ``XC_pad``
  with -128 (SAME), which equals TFLite's MAX_POOL_2D (padding never wins a max, and a SAME
  window always holds an image pixel), except that the XC op ignores a fused activation
  (checked on 1.4.2: a fused RELU with output zero point 1 let codes down to -50 through).
- SQUARED_DIFFERENCE, RSQRT, MINIMUM, MAXIMUM stay TFLite builtins (xcore-opt 1.4.2 compiles
  them unchanged: ``elementwise_peer_vectors.json``), run by TFLite-Micro's kernels: the
  ``tflite`` rules (:mod:`quantemu.backends.tflite.lower.elementwise_more`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.layers import ConvLayer
from quantemu.backends.tflite.params import conv_params
from quantemu.backends.xs3.xformer.add import XcAddParams, add_elementwise_int8, xc_add_params
from quantemu.backends.xs3.xformer.lookup import lookup8, lookup_table_int8
from quantemu.backends.xs3.xformer.mean import XcMeanParams, mean_int8, xc_mean_params
from quantemu.backends.xs3.xformer.output_transform import OtKind
from quantemu.graph.ir import Node
from quantemu.graph.tflite_import import NCHW_KEY
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

_NHWC_OF_NCHW = (0, 3, 1, 2)  # NCHW axis a is NHWC axis _NHWC_OF_NCHW[a]


def _counted(table: np.ndarray | None, y: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The split-out ``XC_lookup`` after an XC op, with how many codes it changed."""
    if table is None:
        return y, {}
    looked = lookup8(y, table)
    return looked, {"activation_clamped": int(np.count_nonzero(looked != y))}


@dataclass(frozen=True, eq=False, kw_only=True)
class XcAddLayer(Layer):
    """``XC_add`` (then the split-out ``XC_lookup``, if any); constant operands as codes."""

    params: XcAddParams
    constants: tuple[np.ndarray | None, np.ndarray | None]
    table: np.ndarray | None
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """lib_nn's ``add_elementwise`` on the broadcast operands."""
        fed = iter(inputs)
        a, b = (c if c is not None else next(fed).codes for c in self.constants)
        y, counters = _counted(self.table, add_elementwise_int8(a, b, self.params))
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class XcLookupLayer(Layer):
    """``XC_lookup``: ``y = table[uint8(x)]``."""

    table: np.ndarray
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """One gather."""
        return LayerOutput(QTensor(lookup8(inputs[0].codes, self.table), self.encoding), {})


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMeanLayer(Layer):
    """``XC_mean`` over the graph's ``axes`` (contiguous in the TFLite tensor)."""

    axes: tuple[int, ...]
    keepdims: bool
    params: XcMeanParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """lib_nn's ``mean_int8`` (exact sums, float32 requantization)."""
        y = mean_int8(inputs[0].codes, self.axes, self.keepdims, self.params)
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), {})


def _activation_table(node: Node, encoding: LinearEncoding) -> np.ndarray | None:
    """The ``XC_lookup`` for a fused activation xcore-opt splits out, on ``encoding``."""
    kind = node.attrs.get("activation")
    if kind is None:
        return None
    s, z = encoding.scale, int(encoding.zero_point)
    if kind == "relu":
        return lookup_table_int8("relu", s, z, s, z)
    bounds = (float(node.attrs["activation_min"]), float(node.attrs["activation_max"]))
    if kind == "clip" and bounds == (0.0, 6.0):
        return lookup_table_int8("relu6", s, z, s, z)
    raise NotLowerable(f"fused activation {kind} {bounds} (xcore-opt has no XC_lookup for it)")


def lower_xc_add(ctx: TfliteContext, node: Node) -> Layer:
    """Add / Sub: ``XC_add`` and the split-out activation."""
    (c1, e1), (c2, e2) = (ctx.operand(n) for n in node.inputs[:2])
    base = tflite_rules.lower_binary(ctx, node)  # its checks, constants and output encoding
    e_out = base.encoding
    params = xc_add_params(
        e1.scale,
        e1.zero_point,
        e2.scale,
        e2.zero_point,
        e_out.scale,
        e_out.zero_point,
        subtract=node.op_type == "Sub",
    )
    table = _activation_table(node, e_out)
    return ctx.layer(
        XcAddLayer,
        node,
        op="XC_add" if table is None else "XC_add+XC_lookup",
        inputs=base.inputs,
        params=params,
        constants=(c1, c2),
        table=table,
        encoding=e_out,
    )


_UNARY = {
    "Relu": "relu",
    "Tanh": "tanh",
    "Sigmoid": "logistic",
    "HardSwish": "hard_swish",
    "LeakyRelu": "leaky_relu",
}


def _clip_kind(ctx: TfliteContext, node: Node, e_out: LinearEncoding) -> str | None:
    """What xcore-opt makes of a Clip: a table kind, ``identity``, or None (TFLite's op)."""
    a = node.attrs
    source = a.get("tflite_op")
    bounds = (float(a["min"]), float(a["max"]))
    if source == "QUANTIZE":
        return "identity"  # int8 -> int8 requantization: a table of the identity
    if source == "MAX_POOL_2D":
        return "none"  # XC_maxpool2d ignores the fused activation
    if source == "AVERAGE_POOL_2D":  # the depthwise conv's activation (see lower_xc_conv)
        pool = ctx.graph.producer(node.inputs[0])
        if pool is None or _avgpool_as_conv(ctx, pool)[2] is None:
            return None  # TFLite's DEPTHWISE_CONV_2D applies it: TFLite's clamp
        if int(e_out.zero_point) == -128:
            return "none"
        return "relu" if bounds[1] == np.inf else "clip"
    if bounds == (0.0, 6.0) and source in (None, "RELU6"):
        return "relu6"
    return None


def lower_xc_lookup(ctx: TfliteContext, node: Node) -> Layer:
    """Relu, Clip (RELU6, QUANTIZE, a pool's activation), Tanh, Sigmoid, HardSwish,
    LeakyRelu: ``XC_lookup``; other Clips keep TFLite-Micro's kernel."""
    e_in, e_out = ctx.encoding(node.inputs[0]), ctx.output_encoding(node)
    a = node.attrs
    bounds = (0.0, 6.0)
    if node.op_type == "Clip":
        kind = _clip_kind(ctx, node, e_out)
        if kind is None:
            return tflite_rules.lower_relu(ctx, node)
        if kind != "relu6":
            bounds = (float(a["min"]), float(a["max"]))
    else:
        kind = _UNARY[node.op_type]
    if kind == "none":
        kind, note = "identity", "xcore-opt drops this fused activation (the XC op only saturates)"
    else:
        note = ""
    table = lookup_table_int8(
        kind,
        e_in.scale,
        e_in.zero_point,
        e_out.scale,
        e_out.zero_point,
        alpha=float(a.get("alpha", 0.0)),
        bounds=bounds,
    )
    op = "XC_lookup" if not note else "dropped_activation"
    return ctx.layer(XcLookupLayer, node, op=op, note=note, table=table, encoding=e_out)


def _nhwc_axes(ctx: TfliteContext, name: str, axes: tuple[int, ...]) -> list[int]:
    """The reduced axes as the TFLite tensor numbers them (rank-4 NCHW values mapped back)."""
    graph = ctx.graph
    rank = len(ctx.shape(name))
    if graph.metadata.get("source_format") == "tflite":
        nchw = name in set(graph.metadata.get(NCHW_KEY, "").split("\n"))
    else:
        nchw = rank == 4  # a converter would hold an ONNX NCHW tensor as NHWC
    axes = [a % rank for a in axes]
    return sorted(_NHWC_OF_NCHW[a] for a in axes) if nchw and rank == 4 else sorted(axes)


def lower_xc_mean(ctx: TfliteContext, node: Node) -> Layer:
    """ReduceMean / GlobalAveragePool: ``XC_mean`` when the reduced TFLite axes are
    contiguous, else TFLite-Micro's MEAN."""
    base = tflite_rules.lower_mean(ctx, node)
    x = node.inputs[0]
    nhwc = _nhwc_axes(ctx, x, base.axes)
    if nhwc[-1] - nhwc[0] != len(nhwc) - 1:
        return dataclasses.replace(
            base, note=f"xcore-opt keeps MEAN over non-contiguous axes {nhwc}: TFLite-Micro's"
        )
    shape = ctx.shape(x)
    count = int(np.prod([shape[a] for a in base.axes]))
    e_in, e_out = ctx.encoding(x), base.encoding
    params = xc_mean_params(e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point, count)
    return ctx.layer(
        XcMeanLayer,
        node,
        op="XC_mean",
        axes=base.axes,
        keepdims=base.keepdims,
        params=params,
        encoding=e_out,
    )


def _avgpool_as_conv(ctx: TfliteContext, node: Node):
    """``(unit weights, filter scales, OT or None)`` of the depthwise conv xcore-opt makes of
    an AveragePool; no OT when the conv stays TFLite's DEPTHWISE_CONV_2D: channels not a
    multiple of 4 (the channel-padding pattern wants a quantized bias, and the pool's
    replacement has a plain int32 one, so the conv is never aligned), or an OT error above
    the threshold."""
    # xformer.py registers these rules: importing it at module level would be circular
    from quantemu.backends.xs3.lower.xformer import solve  # noqa: PLC0415

    channels = ctx.shape(node.inputs[0])[1]
    kh, kw = (int(k) for k in node.attrs["kernel_shape"])
    ones = np.ones((channels, 1, kh, kw), np.int8)
    s_w = np.full(channels, np.float32(1.0 / (kh * kw)), np.float32)
    if channels % 4:
        return ones, s_w, None
    e_in = ctx.encoding(node.inputs[0])
    ot = solve(ctx, ones[:, 0], None, s_w, (e_in, ctx.same_as_input(node)))
    return ones, s_w, None if ot.kind is OtKind.REVERT_TO_TFLITE else ot


def lower_xc_avgpool(ctx: TfliteContext, node: Node) -> Layer:
    """AveragePool: a depthwise ``XC_conv2d_v2`` with unit weights, or TFLite's
    DEPTHWISE_CONV_2D with them (:func:`_avgpool_as_conv`); both over zero-point padding."""
    from quantemu.backends.xs3.lower.xformer import XcConv2dLayer  # noqa: PLC0415

    if node.attrs["ceil_mode"]:
        # xcore-opt averages over zero-point padding (a full window); what a converter makes of
        # a ceil-mode overhang is not known, so no answer is given rather than a guessed one.
        raise NotLowerable("ceil_mode average pooling (no TFLite form xcore-opt is known to get)")
    base = tflite_rules.lower_pool(ctx, node)  # checks, geometry, output encoding
    e_in, e_out = ctx.encoding(node.inputs[0]), base.encoding
    ones, s_w, ot = _avgpool_as_conv(ctx, node)
    geometry = {"strides": base.strides, "dilations": (1, 1), "pads": base.pads}
    if ot is None:
        params = conv_params(e_in.scale, e_in.zero_point, s_w, e_out.scale, e_out.zero_point)
        note = "AVERAGE_POOL_2D as xcore-opt's depthwise conv, left to TFLite (unaligned or OT)"
        return ctx.layer(
            ConvLayer,
            node,
            op="DEPTHWISE_CONV_2D",
            note=note,
            weights=ones,
            bias=None,
            params=params,
            depthwise=True,
            encoding=e_out,
            **geometry,
        )
    return ctx.layer(
        XcConv2dLayer,
        node,
        op="XC_conv2d_v2",
        note="AVERAGE_POOL_2D as xcore-opt's depthwise conv (SAME borders average zero points)",
        weights=ones,
        depthwise=True,
        pad_value=int(e_in.zero_point),
        ot=ot,
        rounding=ctx.options.vlashr,
        table=None,
        encoding=e_out,
        **geometry,
    )


def lower_xc_maxpool(ctx: TfliteContext, node: Node) -> Layer:
    """MaxPool: ``XC_maxpool2d``, which computes TFLite's MAX_POOL_2D (module docstring)."""
    base = tflite_rules.lower_pool(ctx, node)
    return dataclasses.replace(base, op="XC_maxpool2d")


def refuse_gelu(ctx: TfliteContext, node: Node) -> Layer:
    """Gelu: xcore-opt 1.4.2 keeps TFLite's GELU, then fails ("Could not set up compiler":
    its TFLite-Micro build has no GELU kernel); XMOS's host interpreter has none either."""
    raise NotLowerable(
        "xcore-opt 1.4.2 keeps GELU as a TFLite builtin and then fails to compile the model "
        "(\"Didn't find op for builtin opcode 'GELU'\"); neither it nor XMOS's runtime has a "
        "GELU kernel. Remedy: an activation xcore-opt tabulates (Relu, HardSwish, Sigmoid, Tanh), "
        "or the tflite backend, which runs LiteRT's GELU"
    )


def refuse_batch_matmul(ctx: TfliteContext, node: Node) -> Layer:
    """MatMul of two activations: TFLite's BATCH_MATMUL, which xcore-opt 1.4.2 keeps as a
    builtin and then fails on ("Could not set up compiler"): neither its TFLite-Micro build nor
    XMOS's host interpreter registers a BATCH_MATMUL kernel (tests/data/batch_matmul)."""
    raise NotLowerable(
        f"both operands ({node.inputs[0]}, {node.inputs[1]}) are activations: TFLite's "
        "BATCH_MATMUL, which xcore-opt 1.4.2 keeps as a TFLite builtin and then fails to compile "
        "(\"Didn't find op for builtin opcode 'BATCH_MATMUL'\"); XMOS's runtime has no "
        "BATCH_MATMUL kernel either. Remedy: the tflite backend (runtime 'tflite_micro' or "
        "'litert_reference'), which runs BATCH_MATMUL"
    )


RULES = {
    "Add": lower_xc_add,
    "Sub": lower_xc_add,
    **dict.fromkeys(("Relu", "Clip", *_UNARY), lower_xc_lookup),
    "ReduceMean": lower_xc_mean,
    "GlobalAveragePool": lower_xc_mean,
    "AveragePool": lower_xc_avgpool,
    "MaxPool": lower_xc_maxpool,
    "Gelu": refuse_gelu,
}

__all__ = [
    "RULES",
    "XcAddLayer",
    "XcLookupLayer",
    "XcMeanLayer",
    "lower_xc_add",
    "lower_xc_avgpool",
    "lower_xc_lookup",
    "lower_xc_maxpool",
    "lower_xc_mean",
    "refuse_batch_matmul",
    "refuse_gelu",
]
