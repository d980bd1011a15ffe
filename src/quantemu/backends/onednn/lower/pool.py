"""Pools: MaxPool on the codes, AveragePool and GlobalAveragePool as ATen's channels-last
quantized kernels (see :mod:`..aten`); MaxPool keeps its input's qparams, the averages may
requantize."""

from __future__ import annotations

from dataclasses import dataclass

from quantemu.backends.onednn.aten import TorchU8Encoding, avg_pool2d_nhwc, global_avg_pool_nhwc
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.backends.onednn.params import MaxPool2dParams
from quantemu.backends.onednn.pool import max_pool2d
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class MaxPoolLayer(U8Layer):
    """Quantized ``max_pool2d``: the maximum code of each window (padding ignored)."""

    params: MaxPool2dParams

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        return LayerOutput(QTensor(max_pool2d(inputs[0].codes, self.params), self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class AvgPoolLayer(U8Layer):
    """Quantized ``avg_pool2d`` (ATen's channels-last kernel, see :mod:`..aten`)."""

    input_encoding: TorchU8Encoding
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int]  # symmetric (pad_h, pad_w), as PyTorch takes them
    count_include_pad: bool

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        y = avg_pool2d_nhwc(
            inputs[0].codes,
            kernel=self.kernel,
            strides=self.strides,
            pads=self.pads,
            count_include_pad=self.count_include_pad,
            e_in=self.input_encoding,
            e_out=self.encoding,
        )
        return LayerOutput(QTensor(y, self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class GlobalAvgPoolLayer(U8Layer):
    """Quantized ``adaptive_avg_pool2d(x, 1)`` (ATen's channels-last kernel)."""

    input_encoding: TorchU8Encoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        y = global_avg_pool_nhwc(inputs[0].codes, self.input_encoding, self.encoding)
        return LayerOutput(QTensor(y, self.encoding))


def _window(node: Node, what: str) -> None:
    a = node.attrs
    if a["dilations"] != (1, 1):
        raise NotLowerable(f"{what} with dilations {a['dilations']} is not lowered")


# A pool's one input is the activation ctx.activation checked, so the layer's inputs are the
# context's default (the node's run-time inputs).


def lower_max_pool(ctx: Context, node: Node) -> MaxPoolLayer:
    """MaxPool -> ``max_pool2d`` on codes; ceil mode becomes extra bottom/right padding."""
    _window(node, "MaxPool")
    a = node.attrs
    x = ctx.activation(node)
    top, left, bottom, right = a["pads"]
    if a["ceil_mode"]:
        _, _, h, w = ctx.shape(x)
        _, _, oh, ow = ctx.shape(node.outputs[0])
        (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
        bottom = max(bottom, (oh - 1) * sh + kh - h - top)
        right = max(right, (ow - 1) * sw + kw - w - left)
    params = MaxPool2dParams(
        ctx.options.isa, a["kernel_shape"], a["strides"], (top, left, bottom, right)
    )
    return ctx.layer(MaxPoolLayer, node, op="quantized::max_pool2d", params=params)


def lower_avg_pool(ctx: Context, node: Node) -> AvgPoolLayer:
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
    return ctx.layer(
        AvgPoolLayer,
        node,
        op="quantized::avg_pool2d [aten nhwc]",
        input_encoding=ctx.encodings[x],
        kernel=(kh, kw),
        strides=tuple(a["strides"]),
        pads=(top, left),
        count_include_pad=bool(a["count_include_pad"]),
    )


def lower_global_avg_pool(ctx: Context, node: Node) -> GlobalAvgPoolLayer:
    """GlobalAveragePool -> ATen's quantized ``adaptive_avg_pool2d(x, 1)``."""
    x = ctx.activation(node)
    if len(ctx.shape(x)) != 4:
        raise NotLowerable(f"input {x} is not 4-D")
    op = "quantized::adaptive_avg_pool2d [aten nhwc]"
    return ctx.layer(GlobalAvgPoolLayer, node, op=op, input_encoding=ctx.encodings[x])
