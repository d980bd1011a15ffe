"""Conv and Gemm in FP16: CMAC and CACC (:mod:`~quantemu.backends.nvdla.fp16.cc`), then the SDP.

The weights are converted to fp16 words (round to nearest even, as the compiler's ``half``
conversion; a weight beyond ±65504 becomes ±Inf, and the layer's note says how many did). CACC
sends fp32 words to the SDP, which adds the fp16 bias in its BS ALU (``FpAdd`` in fp32) and
applies the fused activation (:func:`.sdp.activation_fields`), then ``Fp32ToFp16``. A grouped
convolution is one NVDLA convolution per group (all groups computed together). Gemm and MatMul
with constant weights run as a 1x1 convolution of their ``(N, K)`` input seen as ``(N, K, 1, 1)``.
The CDMA passes FP16 feature data unchanged (no mean or scale in FP16; ``NAN_TO_ZERO`` off) and
counts its NaN and Inf words: the layer's ``nan_inputs`` and ``inf_inputs``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.fp16.cc import conv_fp16_grouped
from quantemu.backends.nvdla.fp16.lower.check import Fp16Check, conv_max_exp, fp16_values
from quantemu.backends.nvdla.fp16.lower.sdp import (
    Fp16Pass,
    activation_fields,
    fp16_counters,
    fp16_pass,
    fp16_words,
    nan_inf_counts,
    run_passes,
)
from quantemu.backends.nvdla.lower.conv import constant_weights, conv_attrs
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource
from quantemu.graph.ir import Attrs, Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext


@dataclass(frozen=True, kw_only=True)
class Fp16ConvLayer(Layer):
    """A Conv (or a Gemm as 1x1 conv) in FP16: fp16 weight words ``[M, C/g, kh, kw]``."""

    encoding: Encoding
    weights: np.ndarray  # uint16 fp16 words
    attrs: Attrs  # group, pads (top, left, bottom, right), strides, dilations
    dense: bool
    passes: tuple[Fp16Pass, ...]
    check: Fp16Check

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """CMAC + CACC per sample and group, the SDP passes, the CC DC threshold check."""
        x = np.asarray(inputs[0].codes)
        if self.dense:
            x = x.reshape(x.shape[0], -1, 1, 1)
        acc = self._cacc_words(x)
        y, results = run_passes(self.passes, acc)
        # The SDP reads CACC's fp32 words, which it does not count; the NaN/Inf input counters
        # of a convolution are the CDMA's, over the fp16 data it passes on unchanged.
        counters = {**fp16_counters(results), **nan_inf_counts(x)}
        a = self.attrs
        max_exp = conv_max_exp(x, self.weights, group=a["group"], strides=a["strides"],
                               dilations=a["dilations"], pads=a["pads"])  # fmt: skip
        taps = int(np.prod(self.weights.shape[1:]))
        if self.dense:
            y = y.reshape(y.shape[0], -1)
        counters.update(self.check.conv(y, inputs, max_exp.reshape(y.shape), taps))
        return LayerOutput(QTensor(y, self.encoding), counters)

    def _cacc_words(self, x: np.ndarray) -> np.ndarray:
        """The fp32 words CACC sends to the SDP, ``(N, M, OH, OW)`` uint32: every sample and
        group in one :func:`conv_fp16_grouped` pass."""
        a = self.attrs
        pt, pl, pb, pr = a["pads"]
        return conv_fp16_grouped(fp16_values(x), fp16_values(self.weights), groups=a["group"],
                                 stride=tuple(a["strides"]), dilation=tuple(a["dilations"]),
                                 padding=(pl, pt, pr, pb))  # fmt: skip


def _sdp_fields(node: Node, bias_words: np.ndarray | None) -> tuple[dict, dict]:
    fields: dict[str, int] = {}
    operands: dict[str, np.ndarray] = {}
    if bias_words is not None:
        fields.update(BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=int(AluAlgo.SUM),
                      BS_ALU_SRC=int(OperandSource.MEMORY))  # fmt: skip
        operands["BS_ALU"] = bias_words
    fields.update(activation_fields(node.attrs, node.attrs.get("activation")))
    return fields, operands


def lower_conv_fp16(ctx: LoweringContext, node: Node) -> Fp16ConvLayer:
    """Conv / Gemm / MatMul (constant weights) -> CMAC + CACC + SDP in FP16."""
    _, w, bias, dense = constant_weights(ctx, node)
    words = fp16_words(w)
    bias_words = None if bias is None else fp16_words(np.asarray(bias).reshape(-1))
    fields, operands = _sdp_fields(node, bias_words)
    overflow = int(np.count_nonzero(~np.isfinite(fp16_values(words)) & np.isfinite(w)))
    note = "CMAC block floating point + CACC fp48 (cmod); SDP fp32, out fp16"
    if overflow:
        note += f"; {overflow} weight(s) beyond ±65504 became ±Inf in fp16"
    attrs = conv_attrs(node)
    return ctx.layer(Fp16ConvLayer, node, op="cacc+sdp_fp16" + ("(fc)" if dense else ""),
                     inputs=node.inputs[:1], note=note, encoding=ctx.new_encoding(node.outputs[0]),
                     weights=words, attrs=attrs, dense=dense,
                     passes=(fp16_pass(fields, operands),),
                     check=_reference(node, fp16_values(words), bias_words))  # fmt: skip


def _reference(node: Node, w16: np.ndarray, bias_words) -> Fp16Check:
    """The local reference: the node as a Conv (or a Gemm, dense) over the fp16 weights and
    bias (Gemm's alpha and beta are already folded into them)."""
    fused = {k: v for k, v in node.attrs.items() if k.startswith("activation")}
    inputs = ("x", "w", "b" if bias_words is not None else "")
    if node.op_type == "Conv":
        ref = Node(node.name, "Conv", inputs, node.outputs, node.attrs)
        constants = {1: w16.astype(np.float32)}
    else:
        gemm = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1, **fused}
        ref = Node(node.name, "Gemm", inputs, node.outputs, gemm)
        constants = {1: w16.reshape(w16.shape[0], -1).astype(np.float32)}
    if bias_words is not None:
        constants[2] = fp16_values(bias_words).astype(np.float32)
    return Fp16Check(ref, constants)
