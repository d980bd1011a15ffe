"""The lowered layers of the onednn backend: one frozen dataclass per kind of graph node.

Each layer holds what lowering derived once (quantized weights, ``Requantization``, kernel
families, code bounds) and computes a batch with the backend's exact operators
(:mod:`.conv`, :mod:`.matmul`, :mod:`.requant`, :mod:`.pool`) or PyTorch's ATen kernels
(:mod:`.lower_aten`). Tensors are uint8 NCHW codes in :class:`TorchU8Encoding`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.conv import conv2d
from quantemu.backends.onednn.lower_aten import (
    TorchU8Encoding,
    avg_pool2d_nhwc,
    global_avg_pool_nhwc,
    quantized_add,
)
from quantemu.backends.onednn.matmul import matmul
from quantemu.backends.onednn.params import (
    Conv2dParams,
    MatmulApi,
    MatmulParams,
    MaxPool2dParams,
    QuantizedConv2dParams,
    QuantizedLinearParams,
    SrcType,
)
from quantemu.backends.onednn.pool import max_pool2d
from quantemu.backends.onednn.requant import requantize_f32
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, QTensor


@dataclass(frozen=True, eq=False, kw_only=True)
class _Layer(Layer):
    """The fields every lowered layer has (:class:`quantemu.program.model.Layer`'s and the
    output encoding)."""

    encoding: TorchU8Encoding  # of the output tensor


def _finish(v: np.ndarray, lo: int, hi: int, fused: bool) -> tuple[np.ndarray, int]:
    """u8 codes of the binary32 values ``v`` clamped to ``[lo, hi]``, and the saturated count.

    ``clamp(rne(v), 0, 255)`` with NaN -> 0 (x86 ``cvtps2dq`` gives the integer indefinite,
    which the saturating packs send to 0), as ``to_8bit`` computes it: bounding ``v`` to
    ``[-0.5, 255]`` first changes no rounded value (``rne(-0.5) = 0``) and ``fmax`` maps NaN to
    the lower bound. ``fused``: a ReLU/Clip is fused; oneDNN applies it before the output
    scale, so what it cuts does not saturate at 0.
    """
    # rne(v) > 255 iff v >= 255.5 (the tie goes to 256); rne(v) < 0 iff v < -0.5.
    saturated = np.count_nonzero(v >= 255.5) + (0 if fused else np.count_nonzero(v < -0.5))
    t = np.fmax(v, np.float32(-0.5))
    np.minimum(t, np.float32(255), out=t)
    np.rint(t, out=t)
    y = t.astype(np.uint8)
    if lo > 0 or hi < 255:
        np.clip(y, lo, hi, out=y)
    return y, int(saturated)


@dataclass(frozen=True, eq=False, kw_only=True)
class QConv2dLayer(_Layer):
    """PyTorch ``quantized::conv2d`` (``_relu``) on oneDNN: ``conv2d`` then ``requantize``.

    ``conv.impl`` is the accumulator's kernel family (pairing order on non-VNNI ISAs),
    ``params.impl`` the requantization's f32 order; ``lo``/``hi`` the fused activation's codes.
    """

    weight: np.ndarray  # int8 (O, C/groups, KH, KW)
    bias: np.ndarray | None  # float32 (O,)
    conv: Conv2dParams
    params: QuantizedConv2dParams
    lo: int
    hi: int
    fused: bool  # a fused activation (ReLU / Clip)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        res = conv2d(inputs[0].codes, self.weight, self.conv)
        v = requantize_f32(
            res.acc, 1, self.params.quant, self.params.impl, w_round_trip=False, bias=self.bias
        )
        y, saturated = _finish(v, self.lo, self.hi, self.fused)
        counters = {"pair_saturated": res.saturated_pairs, "output_saturated": saturated}
        return LayerOutput(QTensor(y, self.encoding), counters, {"acc": res.acc})


@dataclass(frozen=True, eq=False, kw_only=True)
class QLinearLayer(_Layer):
    """PyTorch ``quantized::linear`` (``_relu``) on oneDNN: ``matmul`` then ``requantize``."""

    weight: np.ndarray  # int8 (N, K), as quantized_linear takes it
    weight_t: np.ndarray  # int8 (K, N), contiguous, the matmul's B
    bias: np.ndarray | None
    params: QuantizedLinearParams
    lo: int
    hi: int
    fused: bool

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        quant = self.params.quant
        mp = MatmulParams(self.params.isa, SrcType.U8, MatmulApi.MATMUL, quant.x_zero_point)
        res = matmul(inputs[0].codes, self.weight_t, mp)
        v = requantize_f32(res.acc, 1, quant, self.params.impl, w_round_trip=True, bias=self.bias)
        y, saturated = _finish(v, self.lo, self.hi, self.fused)
        counters = {"pair_saturated": res.saturated_pairs, "output_saturated": saturated}
        return LayerOutput(QTensor(y, self.encoding), counters, {"acc": res.acc})


@dataclass(frozen=True, eq=False, kw_only=True)
class QAddLayer(_Layer):
    """PyTorch ``quantized::add`` (``add_relu``): ATen's float kernel (see :mod:`.lower_aten`)."""

    input_encodings: tuple[TorchU8Encoding, TorchU8Encoding]
    relu: bool
    threads: int
    lo: int
    hi: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        a, b = (t.codes for t in inputs)
        encodings = (*self.input_encodings, self.encoding)
        y, saturated = quantized_add(a, b, encodings, relu=self.relu, threads=self.threads)
        if self.lo > 0 or self.hi < 255:  # a fused Clip: ATen's quantized clamp on the codes
            y = np.clip(y, self.lo, self.hi).astype(np.uint8)
        return LayerOutput(QTensor(y, self.encoding), {"output_saturated": saturated})


@dataclass(frozen=True, eq=False, kw_only=True)
class MaxPoolLayer(_Layer):
    """Quantized ``max_pool2d``: the maximum code of each window (padding ignored)."""

    params: MaxPool2dParams

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        return LayerOutput(QTensor(max_pool2d(inputs[0].codes, self.params), self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class AvgPoolLayer(_Layer):
    """Quantized ``avg_pool2d`` (ATen's channels-last kernel, see :mod:`.lower_aten`)."""

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
class GlobalAvgPoolLayer(_Layer):
    """Quantized ``adaptive_avg_pool2d(x, 1)`` (ATen's channels-last kernel)."""

    input_encoding: TorchU8Encoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        y = global_avg_pool_nhwc(inputs[0].codes, self.input_encoding, self.encoding)
        return LayerOutput(QTensor(y, self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class ClampLayer(_Layer):
    """Quantized ``relu`` / ``clamp`` / ``hardtanh``: codes clamped to ``[lo, hi]``, qparams kept.

    ``lo``/``hi`` are ATen's ``quantize_val`` of the float bounds (ReLU: the zero point).
    """

    lo: int
    hi: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        y = np.clip(inputs[0].codes, self.lo, self.hi).astype(np.uint8)
        return LayerOutput(QTensor(y, self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class ReshapeLayer(_Layer):
    """Flatten / Reshape / Transpose / Identity: the codes move, their values do not."""

    shape: tuple[int, ...] | None  # ONNX Reshape form (0 copies, -1 infers); None: keep
    flatten_axis: int | None
    perm: tuple[int, ...] | None

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        x = inputs[0].codes
        if self.flatten_axis is not None:
            lead = int(np.prod(x.shape[: self.flatten_axis]))
            x = x.reshape(lead, -1)
        elif self.shape is not None:
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(self.shape)]
            x = x.reshape(dims)
        elif self.perm is not None:
            x = np.ascontiguousarray(x.transpose(self.perm))
        return LayerOutput(QTensor(x, self.encoding))


@dataclass(frozen=True, eq=False, kw_only=True)
class FloatFallbackLayer(_Layer):
    """A node run in float32: dequantize, the graph executor's kernel, ``quantize_per_tensor``.

    ``constants`` are the node's initializer inputs by position; the activations fill the rest.
    Never exact (``exact=False``): the note says why the node is not lowered.
    """

    node: Node
    constants: tuple[tuple[int, np.ndarray], ...]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        args: list[np.ndarray | None] = [None] * len(self.node.inputs)
        for index, value in self.constants:
            args[index] = value
        activations = iter(t.dequantize() for t in inputs)
        for index, name in enumerate(self.node.inputs):
            if args[index] is None and name:
                args[index] = next(activations)
        (out,) = run_node(self.node, args)[:1]
        codes = self.encoding.target_quantize(out)
        bounds = np.asarray(out, np.float64) / self.encoding.scale + self.encoding.zp
        saturated = int(np.count_nonzero((bounds < -0.5) | (bounds > 255.5)))
        return LayerOutput(QTensor(codes, self.encoding), {"output_saturated": saturated})
