"""Conv and Gemm/MatMul nodes onto lib_nn's BSO operators, as tflite2xcore chooses them.

Operator choice (tflite2xcore's pass order): ``conv2d_1x1`` for a 1x1 kernel with unit stride
and no padding; ``conv2d_shallowin`` when a kernel row fits one 32-byte VLMACCR
(``K_w * C_in <= 32``, C_in in {4, 8, 16, 32}); ``conv2d_depthwise`` for depthwise
convolutions (group = C_in = C_out); ``conv2d_deep`` otherwise; ``fully_connected_8`` for Gemm
and MatMul with constant weights. Input channels are padded with zeros to a multiple of 4 (the
padded weights are zero, so they add nothing); output channel counts that are not a multiple of
4 are padded with zero-weight channels that are dropped after the operator.

Parameters are derived once, at lowering time: TFLite's int8 weights, scales and int32 biases
(:mod:`quantemu.backends.tflite.quantize`), then the BSO fields from tflite2xcore's rules
(:func:`quantemu.backends.xs3.bso.quantize.derive_bso`, whose multiplier is ``bias_scale / s_out``
exactly as the converter's ``_multiplier``).

A dilated convolution, or a Gemm/MatMul whose weights are not a constant 2-D matrix, has no
lib_nn form: the rule raises :class:`~quantemu.program.lowering.NotLowerable` and the node runs
as a float fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.backends.tflite.quantize import (
    ActivationRange,
    activation_range,
    bias_scales,
    override_weights,
    quantize_bias,
    quantize_weights,
)
from quantemu.backends.xs3.bso.conv import (
    VLMACCR_BYTES,
    conv2d_1x1,
    conv2d_deep,
    conv2d_depthwise,
    conv2d_shallowin,
)
from quantemu.backends.xs3.bso.fc import fully_connected_8
from quantemu.backends.xs3.bso.params import ConvParams, Window, YParams
from quantemu.backends.xs3.bso.quantize import derive_bso
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

SHALLOWIN_C_IN = (4, 8, 16, 32)
_OPS = {
    "conv2d_deep": conv2d_deep,
    "conv2d_shallowin": conv2d_shallowin,
    "conv2d_1x1": conv2d_1x1,
    "conv2d_depthwise": conv2d_depthwise,
    "fully_connected_8": fully_connected_8,
}


def ceil4(n: int) -> int:
    """``n`` rounded up to a multiple of 4 (lib_nn's word alignment)."""
    return n + (-n % 4)


def pad_last(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` with its last axis zero-padded to ``size`` (no copy when it is already that long)."""
    if x.shape[-1] == size:
        return x
    widths = [(0, 0)] * (x.ndim - 1) + [(0, size - x.shape[-1])]
    return np.pad(x, widths)


@dataclass(frozen=True, eq=False, kw_only=True)
class LibnnLayer(Layer):
    """A Conv or Gemm node on one lib_nn BSO operator, with its precomputed parameters.

    ``kernel`` and ``bso`` are laid out for ``op``; ``params`` is its ConvParams (windowed
    operators) or OutputOptions (1x1, fully_connected_8). Inputs arrive in graph layout (NCHW or
    (N, C)) and are viewed channels-last, the layout lib_nn reads; ``in_channels`` is the padded
    C_in, ``out_channels`` the real C_out (padded channels are dropped). ``act`` is the fused
    activation's int8 range, applied when ``apply_act`` (``activation_clamp`` option).
    """

    kernel: np.ndarray
    bso: np.ndarray
    params: Any
    in_channels: int
    out_channels: int
    act: ActivationRange
    apply_act: bool
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Run the lib_nn operator on the batch (channels-last views, no per-image loop)."""
        x = np.moveaxis(inputs[0].codes, 1, -1)  # NCHW -> NHWC view; (N, C) unchanged
        x = np.ascontiguousarray(pad_last(x, self.in_channels))
        res = _OPS[self.op](*_operands(self.op, x, self.kernel), self.bso, self.params)
        c = self.out_channels
        y, raw = res.y[..., :c], res.y_raw[..., :c]
        counters = {**res.counters(), **self._output_counters(raw)}
        if self.apply_act:
            y = self.act.clamp(y)
        codes = np.moveaxis(y, -1, 1)  # back to graph layout, a view of the NHWC result
        acc = np.moveaxis(res.acc[..., : self.out_channels], -1, 1)
        return LayerOutput(QTensor(codes, self.encoding), counters, {"acc": acc})

    def _output_counters(self, raw: np.ndarray) -> dict[str, int]:
        """``output_saturated`` counts the clamps to the int8 output range that lose
        information: a clamp the fused activation would also make (a ReLU output below the
        zero point: the range starts at the ReLU's 0) is counted in ``activation_clamped``
        instead, which counts every output the activation moves. Padded output channels (zero
        weights, zero bias) are excluded: they are not outputs of the model."""
        options = self.params.options if isinstance(self.params, ConvParams) else self.params
        low = options.output_low
        moved = self.act.moved(raw)
        clamped = (raw < low) | (raw > 127)
        return {
            "output_saturated": int(np.count_nonzero(clamped & ~moved)),
            "activation_clamped": int(np.count_nonzero(moved)),
        }


def _operands(op: str, x: np.ndarray, kernel: np.ndarray):
    # fully_connected_8 takes (W, X); the convolutions take (X, K).
    return (kernel, x) if op == "fully_connected_8" else (x, kernel)


def _bias_codes(ctx: Xs3Context, name: str, bias, b_scales: np.ndarray) -> np.ndarray:
    override = ctx.graph.quant_overrides.get(name) if name else None
    if override is not None and override.values is not None and override.dtype == "int32":
        return np.broadcast_to(np.asarray(override.values, np.int64), b_scales.shape).copy()
    return quantize_bias(bias, b_scales)


def _bso(where: str, encodings, b_scales, kernel, bias, *, axis: int) -> np.ndarray:
    """BSO from tflite2xcore's rules; a channel with bias scale 0 (all-zero weights in TFLite)
    gets the multiplier 1 instead of 0, which BSO cannot express: its accumulator is the zero
    bias alone, so the output is the zero point either way."""
    enc_in, enc_out = encodings
    scales = np.where(b_scales > 0, b_scales, np.float32(enc_out.scale)).astype(np.float64)
    try:
        derived = derive_bso(
            input_scale=1.0,  # M = bias_scale / s_out: the converter's _multiplier()
            input_zero_point=int(enc_in.zero_point),
            weight_scales=scales,
            output_scale=float(np.float32(enc_out.scale)),
            output_zero_point=int(enc_out.zero_point),
            weights=kernel,
            bias=bias,
            channel_axis=axis,
        )
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    return derived.bso()


def _layer(ctx: Xs3Context, node: Node, op, *, kernel, bso, params, channels, note) -> LibnnLayer:
    enc_out = ctx.encoding(node.outputs[0])
    act = activation_range(node.attrs, enc_out, str(node))
    return ctx.layer(
        LibnnLayer,
        node,
        op=op,
        inputs=node.inputs[:1],
        note=note,
        kernel=kernel,
        bso=bso,
        params=params,
        in_channels=channels[0],
        out_channels=channels[1],
        act=act,
        apply_act=ctx.options.activation_clamp,
        encoding=enc_out,
    )


def _padding_note(c_in: int, c_in_pad: int, c_out: int, c_out_pad: int) -> str:
    parts = []
    if c_in_pad != c_in:
        parts.append(f"input channels zero-padded {c_in} -> {c_in_pad}")
    if c_out_pad != c_out:
        parts.append(
            f"output channels padded {c_out} -> {c_out_pad} with zero weights and dropped after "
            "(tflite2xcore would leave this layer to TFLite-Micro's reference kernel)"
        )
    return "; ".join(parts)


def _conv_params(ctx, node, c_out_pad: int) -> ConvParams:
    attrs = node.attrs
    (k_h, k_w), (s_h, s_w) = attrs["kernel_shape"], attrs["strides"]
    top, left = attrs["pads"][0], attrs["pads"][1]
    out_shape = ctx.shape(node.outputs[0])
    y_h, y_w = out_shape[2], out_shape[3]
    if not (isinstance(y_h, int) and isinstance(y_w, int)):
        raise UnsupportedError(
            f"{node}: the output height and width must be known, got {out_shape}"
        )
    window = Window(k_h, k_w, -top, -left, s_h, s_w)
    z_in = int(ctx.encoding(node.inputs[0]).zero_point)
    return ConvParams(z_in, window, YParams(y_h, y_w, c_out_pad), ctx.options.output_options)


def choose_conv_op(node, c_in_pad: int, depthwise: bool) -> str:
    """The lib_nn operator tflite2xcore picks for a (channel-padded) convolution."""
    attrs = node.attrs
    k_h, k_w = attrs["kernel_shape"]
    pointwise = (k_h, k_w) == (1, 1) and tuple(attrs["strides"]) == (1, 1)
    if pointwise and not any(attrs["pads"]) and not depthwise:
        return "conv2d_1x1"
    if not depthwise and c_in_pad in SHALLOWIN_C_IN and k_w * c_in_pad <= VLMACCR_BYTES:
        return "conv2d_shallowin"
    return "conv2d_depthwise" if depthwise else "conv2d_deep"


def _kernel_layout(op: str, q: np.ndarray, c_in_pad: int, c_out_pad: int) -> np.ndarray:
    """ONNX (C_out, C_in, K_h, K_w) int8 codes -> the operator's kernel, zero-padded."""
    k = np.transpose(q, (0, 2, 3, 1))  # (C_out, K_h, K_w, C_in)
    k = pad_last(k, c_in_pad)
    k = np.pad(k, ((0, c_out_pad - k.shape[0]), (0, 0), (0, 0), (0, 0)))
    if op == "conv2d_1x1":
        return np.ascontiguousarray(k.reshape(k.shape[0], -1))
    if op == "conv2d_shallowin":  # augmented rows: 32 / C_in columns, the extra ones zero
        cols = VLMACCR_BYTES // c_in_pad
        k = np.pad(k, ((0, 0), (0, 0), (0, cols - k.shape[2]), (0, 0)))
    return np.ascontiguousarray(k.astype(np.int8))


def lower_conv(ctx: Xs3Context, node: Node) -> Layer:
    """A Conv node (group 1 or depthwise, no dilation) as one lib_nn convolution."""
    w = ctx.const(node.inputs[1])
    if w is None:
        raise UnsupportedError(f"{node}: the weights must be a constant (initializer)")
    if tuple(node.attrs["dilations"]) != (1, 1):
        raise NotLowerable(
            f"dilations {tuple(node.attrs['dilations'])}: lib_nn convolutions have no dilation"
        )
    c_out, c_in_g = w.shape[0], w.shape[1]
    c_in = ctx.shape(node.inputs[0])[1]
    group = node.attrs["group"]
    depthwise = group > 1 and group == c_in == c_out and c_in_g == 1
    if group != 1 and not depthwise:
        raise UnsupportedError(
            f"{node}: grouped convolution (group={group}, C_in={c_in}, C_out={c_out}); lib_nn "
            "runs group=1 (conv2d_deep/shallowin/1x1) and depthwise (group=C_in=C_out) only: "
            "split the layer into per-group convolutions"
        )
    enc_in, enc_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    # TFLite's converter scheme, shared with the tflite backend (a large bias can raise a
    # channel's weight scale there).
    q, s_w = ctx.weights(node, 1, axis=0)
    b_scales = bias_scales(enc_in.scale, s_w)
    bias = ctx.bias(node, 2, enc_in.scale, s_w)
    bias = np.zeros(c_out, np.int64) if bias is None else np.broadcast_to(bias, (c_out,))
    c_in_pad, c_out_pad = ceil4(c_in), ceil4(c_out)
    op = choose_conv_op(node, c_in_pad, depthwise)
    pad_c = c_out_pad - c_out
    b_scales = np.concatenate([b_scales, np.zeros(pad_c, np.float32)])
    bias = np.concatenate([bias, np.zeros(pad_c, np.int64)])
    if depthwise:  # (C, 1, K_h, K_w) -> (K_h, K_w, C), channels padded to C_in_pad
        kernel = np.ascontiguousarray(pad_last(np.transpose(q[:, 0], (1, 2, 0)), c_in_pad))
        axis = -1
    else:
        kernel, axis = _kernel_layout(op, q, c_in_pad, c_out_pad), 0
    bso = _bso(str(node), (enc_in, enc_out), b_scales, kernel, bias, axis=axis)
    if op == "conv2d_1x1":
        params = ctx.options.output_options
    else:
        params = _conv_params(ctx, node, c_out_pad)
    note = _padding_note(c_in, c_in_pad, c_out, c_out_pad)
    return _layer(
        ctx, node, op, kernel=kernel, bso=bso, params=params, channels=(c_in_pad, c_out), note=note
    )


def _dense_weights(ctx, node) -> tuple[np.ndarray, float, str]:
    """``(W (C_out, C_in) float32, alpha, weight name)`` of a Gemm or MatMul with constant B."""
    b_name = node.inputs[1]
    b = ctx.const(b_name)
    if node.op_type == "Gemm":
        if node.attrs["transA"]:
            raise UnsupportedError(f"{node}: transA=1 is not supported; transpose A beforehand")
        w = b if node.attrs["transB"] else b.T
        return np.asarray(w, np.float32), float(node.attrs["alpha"]), b_name
    return np.asarray(b.T, np.float32), 1.0, b_name


def _dense_bias(ctx, node, c_out: int) -> tuple[Any, str]:
    if node.op_type != "Gemm" or len(node.inputs) < 3 or not node.inputs[2]:
        return None, ""
    c = ctx.const(node.inputs[2])
    if c is None or c.size not in (1, c_out) or (c.ndim == 2 and c.shape[0] != 1):
        raise UnsupportedError(
            f"{node}: C must be a constant bias of shape ({c_out},) or a scalar for "
            "fully_connected_8"
        )
    beta = np.float32(node.attrs["beta"])
    return (np.asarray(c, np.float32).reshape(-1) * beta).astype(np.float32), node.inputs[2]


def lower_dense(ctx: Xs3Context, node: Node) -> Layer:
    """Gemm / MatMul with constant 2-D weights as ``fully_connected_8`` (C_in padded to 4)."""
    b = ctx.const(node.inputs[1])
    if b is None or b.ndim != 2 or len(ctx.shape(node.inputs[0])) != 2:
        raise NotLowerable("not a fully-connected layer: weights must be constant 2-D")
    w, alpha, w_name = _dense_weights(ctx, node)
    if alpha != 1.0:
        if w_name in ctx.graph.quant_overrides:
            raise UnsupportedError(f"{node}: alpha={alpha} with quantized weights")
        w = (w * np.float32(alpha)).astype(np.float32)
    c_out, c_in = w.shape
    enc_in, enc_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    if w_name in ctx.graph.quant_overrides:
        override = ctx.graph.quant_overrides[w_name]
        # ONNX stores (C_in, C_out) for MatMul/Gemm transB=0: the output channel axis is 1.
        axis = 0 if node.op_type == "Gemm" and node.attrs["transB"] else 1
        q, s_w = override_weights(override, w_name, axis, c_out)
        q = q if axis == 0 else q.T
    else:
        q, s_w = quantize_weights(w, axis=0)
    bias_f, b_name = _dense_bias(ctx, node, c_out)
    b_scales = bias_scales(enc_in.scale, s_w)
    bias = _bias_codes(ctx, b_name, bias_f, b_scales)
    c_in_pad = ceil4(c_in)
    kernel = np.ascontiguousarray(pad_last(q, c_in_pad))
    bso = _bso(str(node), (enc_in, enc_out), b_scales, kernel, bias, axis=0)
    note = _padding_note(c_in, c_in_pad, c_out, c_out)
    params = ctx.options.output_options
    channels = (c_in_pad, c_out)
    op = "fully_connected_8"
    return _layer(
        ctx, node, op, kernel=kernel, bso=bso, params=params, channels=channels, note=note
    )
