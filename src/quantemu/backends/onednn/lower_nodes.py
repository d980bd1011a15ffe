"""Graph node -> onednn layer: one builder per ONNX op, with the toolchain's parameter rules.

A builder returns a layer from :mod:`.lower_layers`, or raises :class:`NotLowerable` with the
reason when the node has no integer lowering (``lower`` then makes a float fallback or raises
``UnsupportedError``, as the options say). Weights follow PyTorch's ``from_float``: per output
channel symmetric s8 scales of ``PerChannelMinMaxObserver`` (``weight_scales``), codes
``clamp(rne(w ⊗ rr(s)), −128, 127)`` as ``torch.quantize_per_channel`` gives them; biases stay
float32. A QDQ model's quantized weights (``quant_overrides`` with ``values``) are taken as they
are when PyTorch's scheme can hold them (s8, zero point 0, per tensor or per output channel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.backends.onednn.f32 import f32, rr
from quantemu.backends.onednn.family import (
    predict_conv_impl,
    predict_quantized_conv2d_impl,
    predict_quantized_linear_impl,
)
from quantemu.backends.onednn.lower_aten import TorchU8Encoding, quantize_val
from quantemu.backends.onednn.lower_layers import (
    AvgPoolLayer,
    ClampLayer,
    GlobalAvgPoolLayer,
    MaxPoolLayer,
    QAddLayer,
    QConv2dLayer,
    QLinearLayer,
    ReshapeLayer,
)
from quantemu.backends.onednn.params import (
    Conv2dParams,
    ConvGeometry,
    ConvImpl,
    MaxPool2dParams,
    QuantizedConv2dParams,
    QuantizedImpl,
    QuantizedLinearParams,
    Requantization,
    SrcType,
)
from quantemu.backends.onednn.quantize import weight_scales
from quantemu.graph.ir import Graph, Node


class NotLowerable(Exception):
    """A node without an integer lowering; the message says why (internal to lowering)."""


@dataclass(frozen=True)
class Context:
    """What every builder reads: the graph, the tensor encodings and the parsed options."""

    graph: Graph
    encodings: Mapping[str, TorchU8Encoding]
    options: Any  # lower.Options (kept untyped here to avoid an import cycle)

    def base(self, node: Node, op: str, inputs: tuple[str, ...], note: str = "") -> dict:
        """The common layer fields of ``node``."""
        return {
            "name": node.name,
            "op": op,
            "inputs": inputs,
            "output": node.outputs[0],
            "exact": True,
            "note": note,
            "encoding": self.encodings[node.outputs[0]],
        }

    def constant(self, node: Node, index: int, role: str) -> np.ndarray:
        """Initializer input ``index`` of ``node``, else NotLowerable."""
        name = node.inputs[index] if index < len(node.inputs) else ""
        if name not in self.graph.initializers:
            raise NotLowerable(f"the {role} ({name or 'absent'}) is not a constant initializer")
        return np.asarray(self.graph.initializers[name], dtype=np.float32)

    def activation(self, node: Node, index: int = 0) -> str:
        """Name of the run-time tensor at input ``index`` (not an initializer)."""
        name = node.inputs[index]
        if name in self.graph.initializers:
            raise NotLowerable(f"input {index} ({name}) is a constant, not an activation")
        return name


def activation_bounds(node: Node, enc: TorchU8Encoding) -> tuple[int, int]:
    """Codes ``[lo, hi]`` a fused activation leaves: ReLU ``[zp, 255]``; Clip its bounds.

    A Clip is ATen's quantized clamp, ``quantize_val`` of each bound; a QDQ pair's saturation
    (a Clip to exactly the u8 range) gives ``[0, 255]``, i.e. nothing.
    """
    kind = node.attrs.get("activation")
    if kind is None:
        return 0, 255
    if kind == "relu":
        return enc.zp, 255
    if kind == "clip":
        inv = rr(f32(enc.scale))
        lo, hi = (node.attrs["activation_min"], node.attrs["activation_max"])
        return int(quantize_val(np.float32(lo), inv, enc.zp)), int(
            quantize_val(np.float32(hi), inv, enc.zp)
        )
    raise NotLowerable(f"fused activation {kind!r} has no quantized PyTorch counterpart here")


def cuts_low(node: Node) -> bool:
    """True when a fused activation removes negative values (ReLU, a Clip from >= 0).

    What it cuts is then not counted as saturation; a Q/DQ pair's Clip (from a negative
    bound) is the saturation itself.
    """
    kind = node.attrs.get("activation")
    return kind == "relu" or (kind == "clip" and node.attrs["activation_min"] >= 0)


def activation_suffix(node: Node) -> str:
    """``_relu`` for a fused ReLU (PyTorch's op name), else ``""``."""
    return "_relu" if node.attrs.get("activation") == "relu" else ""


def quantized_weights(ctx: Context, node: Node, w: np.ndarray, *, stored_kn: bool = False):
    """``(int8 codes, scales)`` of weights ``w (O, ...)``: a QDQ override, else PyTorch's rule.

    ``stored_kn``: the file holds the weights as ``(K, N)`` (MatMul, Gemm with ``transB = 0``),
    so an override's values and axis are read transposed.
    """
    name = node.inputs[1]
    override = ctx.graph.quant_overrides.get(name)
    if override is not None and override.values is not None:
        values, zero = np.asarray(override.values), np.asarray(override.zero_point)
        if values.dtype != np.int8 or np.any(zero != 0):
            raise NotLowerable(
                f"weight {name} is {values.dtype} with zero point(s) "
                f"{zero.ravel()[:4].tolist()}: oneDNN takes s8 weights with zero point 0"
            )
        if override.axis not in (None, 1 if stored_kn else 0):
            raise NotLowerable(
                f"weight {name} is quantized along axis {override.axis}, not its output-channel "
                "axis"
            )
        values = values.T if stored_kn else values
        scales = np.broadcast_to(np.asarray(override.scale, np.float32).ravel(), (w.shape[0],))
        return _frozen(values), scales
    scales = weight_scales(np.ascontiguousarray(w), axis=0)
    # torch.quantize_per_channel: rne(w ⊗ rr(s)) (binary32 product), clamped to s8.
    codes = w * rr(scales).reshape((-1,) + (1,) * (w.ndim - 1))
    np.rint(codes, out=codes)
    np.clip(codes, -128, 127, out=codes)
    return _frozen(codes.astype(np.int8)), scales


def _frozen(codes: np.ndarray) -> np.ndarray:
    """Read-only int8 codes that own their data: the backend caches what it derives from them."""
    if not (codes.dtype == np.int8 and codes.flags.owndata and codes.flags.c_contiguous):
        codes = np.array(codes, dtype=np.int8, order="C")
    codes.setflags(write=False)
    return codes


def requantization(ctx: Context, x: str, out: str, scales: np.ndarray) -> Requantization:
    """The ``Requantization`` of a conv/linear from the tensors' encodings and weight scales."""
    ex, ey = ctx.encodings[x], ctx.encodings[out]
    return Requantization(ex.scale, ex.zp, tuple(scales.tolist()), ey.scale, ey.zp)


def build_conv(ctx: Context, node: Node) -> QConv2dLayer:
    """Conv -> ``quantized::conv2d`` with the predicted (or chosen) kernel families."""
    x = ctx.activation(node)
    w = ctx.constant(node, 1, "weight")
    bias = ctx.constant(node, 2, "bias") if len(node.inputs) > 2 and node.inputs[2] else None
    shape = ctx.graph.tensors[x].shape
    if not all(isinstance(d, int) for d in shape[1:]):
        raise NotLowerable(f"input {x} has a symbolic spatial shape {shape}")
    a = node.attrs
    geometry = ConvGeometry(a["strides"], a["pads"], a["dilations"], a["group"])
    codes, scales = quantized_weights(ctx, node, w)
    opts = ctx.options
    x_shape = (1, *shape[1:])
    q_impl = opts.pick("quantized_conv_impl", node.name)
    c_impl = opts.pick("conv_impl", node.name)
    if q_impl is None:
        q_impl = (
            QuantizedImpl.REF
            if c_impl is ConvImpl.REF
            else predict_quantized_conv2d_impl(opts.isa, x_shape, w.shape, geometry)
        )
    if c_impl is None:
        c_impl = (
            ConvImpl.REF
            if q_impl is QuantizedImpl.REF
            else predict_conv_impl(
                opts.isa, SrcType.U8, x_shape, w.shape, geometry, host_has_vbmi=opts.host_has_vbmi
            )
        )
    quant = requantization(ctx, x, node.outputs[0], scales)
    enc = ctx.encodings[node.outputs[0]]
    lo, hi = activation_bounds(node, enc)
    op = f"quantized::conv2d{activation_suffix(node)} [{q_impl.value}, {c_impl.value}]"
    return QConv2dLayer(
        **ctx.base(node, op, (x,)),
        weight=codes,
        bias=None if bias is None else bias.reshape(-1).astype(np.float32),
        conv=Conv2dParams(opts.isa, SrcType.U8, c_impl, geometry, quant.x_zero_point),
        params=QuantizedConv2dParams(opts.isa, q_impl, quant, geometry),
        lo=lo,
        hi=hi,
        fused=cuts_low(node),
    )


def build_linear(ctx: Context, node: Node) -> QLinearLayer:
    """Gemm / MatMul with constant weights -> ``quantized::linear``."""
    x = ctx.activation(node)
    if len(ctx.graph.tensors[x].shape) != 2:
        raise NotLowerable(f"input {x} is not 2-D (quantized::linear here takes (N, K))")
    b = ctx.constant(node, 1, "weight")
    if b.ndim != 2:
        raise NotLowerable(f"weight of shape {b.shape} is not 2-D")
    a = node.attrs
    stored_kn = node.op_type == "MatMul" or not a["transB"]
    w = b.T if stored_kn else b  # (N, K), as torch.nn.Linear holds it
    bias = None
    if node.op_type == "Gemm":
        if a["transA"]:
            raise NotLowerable("transA = 1 (the activation must be (N, K))")
        if a["alpha"] != 1.0:
            if node.inputs[1] in ctx.graph.quant_overrides:
                raise NotLowerable(f"alpha = {a['alpha']} on a weight quantized in the file")
            w = w * np.float32(a["alpha"])
        if len(node.inputs) > 2 and node.inputs[2]:
            c = ctx.constant(node, 2, "bias")
            if c.size not in (1, w.shape[0]):
                raise NotLowerable(f"bias of shape {c.shape} is not per output feature")
            bias = np.broadcast_to(c.reshape(-1) * np.float32(a["beta"]), (w.shape[0],))
    codes, scales = quantized_weights(ctx, node, w, stored_kn=stored_kn)
    opts = ctx.options
    impl = opts.pick("linear_impl", node.name) or predict_quantized_linear_impl(opts.isa)
    quant = requantization(ctx, x, node.outputs[0], scales)
    lo, hi = activation_bounds(node, ctx.encodings[node.outputs[0]])
    op = f"quantized::linear{activation_suffix(node)} [{impl.value}]"
    return QLinearLayer(
        **ctx.base(node, op, (x,)),
        weight=codes,
        weight_t=_frozen(codes.T),
        bias=None if bias is None else np.ascontiguousarray(bias, dtype=np.float32),
        params=QuantizedLinearParams(opts.isa, impl, quant),
        lo=lo,
        hi=hi,
        fused=cuts_low(node),
    )


def build_add(ctx: Context, node: Node) -> QAddLayer:
    """Add of two activations of one shape -> ``quantized::add`` / ``add_relu``."""
    a, b = ctx.activation(node, 0), ctx.activation(node, 1)
    sa, sb = ctx.graph.tensors[a].shape, ctx.graph.tensors[b].shape
    if sa != sb:
        raise NotLowerable(f"operand shapes {sa} and {sb} differ (broadcasting)")
    kind = node.attrs.get("activation")
    enc = ctx.encodings[node.outputs[0]]
    lo, hi = (0, 255) if kind == "relu" else activation_bounds(node, enc)
    return QAddLayer(
        **ctx.base(node, f"quantized::add{activation_suffix(node)} [aten]", (a, b)),
        input_encodings=(ctx.encodings[a], ctx.encodings[b]),
        relu=kind == "relu",
        threads=ctx.options.threads,
        lo=lo,
        hi=hi,
    )


def _window(node: Node, what: str) -> None:
    a = node.attrs
    if a["dilations"] != (1, 1):
        raise NotLowerable(f"{what} with dilations {a['dilations']} is not lowered")


def build_max_pool(ctx: Context, node: Node) -> MaxPoolLayer:
    """MaxPool -> ``max_pool2d`` on codes; ceil mode becomes extra bottom/right padding."""
    _window(node, "MaxPool")
    a = node.attrs
    x = ctx.activation(node)
    top, left, bottom, right = a["pads"]
    if a["ceil_mode"]:
        _, _, h, w = ctx.graph.tensors[x].shape
        _, _, oh, ow = ctx.graph.tensors[node.outputs[0]].shape
        (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
        bottom = max(bottom, (oh - 1) * sh + kh - h - top)
        right = max(right, (ow - 1) * sw + kw - w - left)
    params = MaxPool2dParams(
        ctx.options.isa, a["kernel_shape"], a["strides"], (top, left, bottom, right)
    )
    return MaxPoolLayer(**ctx.base(node, "quantized::max_pool2d", (x,)), params=params)


def build_avg_pool(ctx: Context, node: Node) -> AvgPoolLayer:
    """AveragePool -> ATen's quantized ``avg_pool2d`` (symmetric pads, floor mode)."""
    _window(node, "AveragePool")
    a = node.attrs
    top, left, bottom, right = a["pads"]
    kh, kw = a["kernel_shape"]
    if a["ceil_mode"] or top != bottom or left != right or top > kh // 2 or left > kw // 2:
        raise NotLowerable(
            f"ceil_mode = {a['ceil_mode']}, pads {a['pads']}: PyTorch's avg_pool2d takes floor "
            "mode and symmetric pads of at most half the kernel"
        )
    x = ctx.activation(node)
    return AvgPoolLayer(
        **ctx.base(node, "quantized::avg_pool2d [aten nhwc]", (x,)),
        input_encoding=ctx.encodings[x],
        kernel=(kh, kw),
        strides=tuple(a["strides"]),
        pads=(top, left),
        count_include_pad=bool(a["count_include_pad"]),
    )


def build_global_avg_pool(ctx: Context, node: Node) -> GlobalAvgPoolLayer:
    """GlobalAveragePool -> ATen's quantized ``adaptive_avg_pool2d(x, 1)``."""
    x = ctx.activation(node)
    if len(ctx.graph.tensors[x].shape) != 4:
        raise NotLowerable(f"input {x} is not 4-D")
    return GlobalAvgPoolLayer(
        **ctx.base(node, "quantized::adaptive_avg_pool2d [aten nhwc]", (x,)),
        input_encoding=ctx.encodings[x],
    )


def build_clamp(ctx: Context, node: Node) -> ClampLayer:
    """Relu / Clip -> ATen's quantized relu / clamp on the codes (qparams kept)."""
    x = ctx.activation(node)
    enc = ctx.encodings[x]
    if node.op_type == "Relu":
        lo, hi, op = enc.zp, 255, "quantized::relu"
    else:
        inv = rr(f32(enc.scale))
        lo = int(quantize_val(np.float32(node.attrs["min"]), inv, enc.zp))
        hi = int(quantize_val(np.float32(node.attrs["max"]), inv, enc.zp))
        op = "quantized::clamp"
    return ClampLayer(**ctx.base(node, op, (x,)), lo=lo, hi=hi)


def build_reshape(ctx: Context, node: Node) -> ReshapeLayer:
    """Flatten / Reshape / Transpose / Identity / Dropout: the codes move unchanged."""
    x = ctx.activation(node)
    a = node.attrs
    return ReshapeLayer(
        **ctx.base(node, node.op_type.lower(), (x,)),
        shape=tuple(a["shape"]) if node.op_type == "Reshape" else None,
        flatten_axis=a["axis"] if node.op_type == "Flatten" else None,
        perm=tuple(a["perm"]) if node.op_type == "Transpose" else None,
    )


BUILDERS = {
    "Conv": build_conv,
    "Gemm": build_linear,
    "MatMul": build_linear,
    "Add": build_add,
    "MaxPool": build_max_pool,
    "AveragePool": build_avg_pool,
    "GlobalAveragePool": build_global_avg_pool,
    "Relu": build_clamp,
    "Clip": build_clamp,
    "Flatten": build_reshape,
    "Reshape": build_reshape,
    "Transpose": build_reshape,
    "Identity": build_reshape,
    "Dropout": build_reshape,
}

# Ops whose PyTorch quantized kernels keep the input's scale and zero point.
KEEPS_QPARAMS = frozenset(
    {"MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Clip", "Flatten", "Reshape"}
    | {"Transpose", "Identity", "Dropout"}
)
# Of those, the ones whose kernel can also requantize to other output qparams.
REQUANTIZING_POOLS = frozenset({"AveragePool", "GlobalAveragePool"})
