"""The ``tflite`` backend's layers: each runs one of TFLite's int8 reference kernels.

Codes flow in the graph's layout (NCHW for convolutions and pooling); each layer holds the
parameters TFLite's ``Prepare`` derives (:mod:`quantemu.backends.tflite.params`) and calls the
vectorized kernel of this package. The two-input elementwise layers (ADD, SUB, MUL,
SQUARED_DIFFERENCE, MINIMUM, MAXIMUM) are in :mod:`.elementwise` with their rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.backends.tflite.activation import (
    hard_swish_int8,
    leaky_relu_int8,
    logistic_int8,
    relu_int8,
    tanh_int8,
)
from quantemu.backends.tflite.batch_matmul import BatchMatMulParams, batch_matmul_int8
from quantemu.backends.tflite.conv import conv2d, depthwise_conv2d, fully_connected
from quantemu.backends.tflite.gelu import gelu_int8
from quantemu.backends.tflite.params import (
    ConvParams,
    MeanParams,
    PoolParams,
    RequantizeParams,
    TfliteRuntime,
)
from quantemu.backends.tflite.pool import average_pool2d, max_pool2d
from quantemu.backends.tflite.reduce import mean
from quantemu.backends.tflite.requant import concatenation, pad, requantize
from quantemu.backends.tflite.rsqrt import rsqrt_int8
from quantemu.backends.tflite.softmax import softmax_int8
from quantemu.graph.ir import Attrs
from quantemu.graph.ops import OPS
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor


@dataclass(frozen=True, eq=False, kw_only=True)
class ConvLayer(Layer):
    """CONV_2D or DEPTHWISE_CONV_2D (``depthwise``) on NCHW codes, OIHW int8 weights."""

    weights: np.ndarray
    bias: np.ndarray | None
    params: ConvParams
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]
    depthwise: bool
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel; the counters say how many outputs were clamped."""
        kernel = depthwise_conv2d if self.depthwise else conv2d
        y, counters = kernel(
            inputs[0].codes,
            self.weights,
            self.bias,
            self.params,
            strides=self.strides,
            dilations=self.dilations,
            pads=self.pads,
        )
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class FullyConnectedLayer(Layer):
    """FULLY_CONNECTED on ``(N, I)`` codes with ``(O, I)`` int8 weights."""

    weights: np.ndarray
    bias: np.ndarray | None
    params: ConvParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel (per-channel or per-tensor multipliers)."""
        y, counters = fully_connected(inputs[0].codes, self.weights, self.bias, self.params)
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class BatchMatMulLayer(Layer):
    """BATCH_MATMUL of two activations (batch axes broadcast; no bias, no activation)."""

    params: BatchMatMulParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel on both operands' codes."""
        y, counters = batch_matmul_int8(inputs[0].codes, inputs[1].codes, self.params)
        return LayerOutput(QTensor(y, self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class PoolLayer(Layer):
    """MAX_POOL_2D or AVERAGE_POOL_2D (``average``); TFLite never counts padded taps."""

    average: bool
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    params: PoolParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel on the input's codes (output shares their quantization)."""
        kernel = average_pool2d if self.average else max_pool2d
        y, counters = kernel(
            inputs[0].codes, self.kernel, self.params, strides=self.strides, pads=self.pads
        )
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class MeanLayer(Layer):
    """MEAN over ``axes`` (the graph's axes), by the path the runtime's kernel takes."""

    axes: tuple[int, ...]
    keepdims: bool
    params: MeanParams
    runtime: TfliteRuntime
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel (see :func:`quantemu.backends.tflite.reduce.mean`)."""
        y, counters = mean(
            inputs[0].codes, self.axes, self.keepdims, self.params, runtime=self.runtime
        )
        return LayerOutput(QTensor(np.asarray(y).astype(np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class RequantizeLayer(Layer):
    """QUANTIZE int8 -> int8 (and a clamp to ``[low, high]``: a Clip or ReLU on codes)."""

    params: RequantizeParams
    low: int
    high: int
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """``requantize`` then the activation's clamp, counted."""
        y, counters = requantize(inputs[0].codes, self.params)
        y = np.asarray(y, np.int64)
        moved = (y < self.low) | (y > self.high)
        out = np.clip(y, self.low, self.high).astype(np.int8)
        counters = {**counters, "activation_clamped": int(np.count_nonzero(moved))}
        return LayerOutput(QTensor(out, self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class MoveLayer(Layer):
    """Reshape, Transpose, Flatten, Identity: the same codes, moved (exact)."""

    op_type: str
    attrs: Attrs
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The float executor's own kernel, which only moves elements."""
        (y,) = OPS[self.op_type].run(self.attrs, [inputs[0].codes])
        return LayerOutput(QTensor(np.ascontiguousarray(y), self.encoding), {})


@dataclass(frozen=True, eq=False, kw_only=True)
class PadLayer(Layer):
    """PAD with a constant code (the zero point for a zero value)."""

    pads: tuple[tuple[int, int], ...]
    fill: int
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """A copy into the padded tensor."""
        y = pad(inputs[0].codes, self.pads, self.fill)
        return LayerOutput(QTensor(np.asarray(y, np.int8), self.encoding), {})


@dataclass(frozen=True, eq=False, kw_only=True)
class ConcatLayer(Layer):
    """CONCATENATION; an input on other quantization is requantized first (a QUANTIZE)."""

    axis: int
    params: tuple[RequantizeParams | None, ...]
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The copy, after the requantizations."""
        y, counters = concatenation([t.codes for t in inputs], self.axis, self.params)
        return LayerOutput(QTensor(np.asarray(y, np.int8), self.encoding), counters)


@dataclass(frozen=True, eq=False, kw_only=True)
class ActivationLayer(Layer):
    """A one-input kernel on codes with its ``Prepare`` parameters: an activation of
    :mod:`..activation`, GELU, RSQRT (:data:`ACTIVATIONS`), or SOFTMAX (``axis``)."""

    kind: str
    params: Any
    encoding: LinearEncoding
    axis: int = -1

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The runtime's kernel for ``kind``."""
        x = inputs[0].codes
        if self.kind == "softmax":
            y, counters = softmax_int8(x, self.params, axis=self.axis)
        else:
            y, counters = ACTIVATIONS[self.kind](x, self.params)
        return LayerOutput(QTensor(np.asarray(y).astype(np.int8), self.encoding), dict(counters))


ACTIVATIONS: dict[str, Callable] = {
    "relu": relu_int8,
    "leaky_relu": leaky_relu_int8,
    "hard_swish": hard_swish_int8,
    "logistic": logistic_int8,
    "tanh": tanh_int8,
    "gelu": gelu_int8,
    "rsqrt": rsqrt_int8,
}
