"""Standalone activations and BatchNormalization in FP16: one SDP pass over fp16 words.

Relu, Clip and LeakyRelu use the BN unit (and EW's ALU for Clip's upper bound) as
:func:`.sdp.activation_fields` programs them. PRelu multiplies negative values by its slope in
the BS unit's PReLU multiplier: a register operand for one slope, a per-channel memory operand
for one slope per channel. A BatchNormalization no convolution absorbed is ``a x + b`` per
channel: BS MUL by ``a``, then BN ALU SUM with ``b`` (both fp16 words, each step rounded in
fp32 by the SDP).
"""

from __future__ import annotations

import functools

import numpy as np

from quantemu.backends.nvdla.fp16.lower.check import Fp16Check, fp16_values
from quantemu.backends.nvdla.fp16.lower.sdp import (
    Fp16SdpLayer,
    activation_fields,
    activation_of,
    fp16_pass,
    fp16_word,
    fp16_words,
)
from quantemu.backends.nvdla.lower.sdp import channel_constant, prelu_slopes
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource
from quantemu.graph.ir import Node
from quantemu.graph.ops.normalize import batchnorm_affine
from quantemu.program.lowering import LoweringContext


def _layer(ctx: LoweringContext, node: Node, *, op: str, fields, operands, check: Fp16Check, note):
    return ctx.layer(Fp16SdpLayer, node, op=op, inputs=node.inputs[:1], note=note,
                     encoding=ctx.new_encoding(node.outputs[0]),
                     passes=(fp16_pass(fields, operands),), check=check)  # fmt: skip


def lower_activation_fp16(ctx: LoweringContext, node: Node) -> Fp16SdpLayer:
    """Relu / Clip / LeakyRelu -> one FP16 SDP pass."""
    kind, attrs = activation_of(node.op_type, node.attrs)
    fields = activation_fields(attrs, kind)
    note = "SDP X (BN unit)" + ("; upper bound in EW ALU MIN" if kind == "clip" else "")
    return _layer(ctx, node, op="sdp_fp16_" + kind, fields=fields, operands={},
                  check=Fp16Check(node), note=note)  # fmt: skip


def lower_prelu_fp16(ctx: LoweringContext, node: Node) -> Fp16SdpLayer:
    """PRelu with a constant slope (one, or one per channel) -> BS PReLU multiply."""
    slopes = prelu_slopes(ctx, node)
    slope = ctx.const(node.inputs[1])
    fields = {"BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_PRELU": 1}
    if np.size(slope) == 1:
        fields.update(BS_MUL_SRC=int(OperandSource.REGISTER), BS_MUL_OPERAND=fp16_word(slopes[0]))
        operands = {}
    else:
        fields["BS_MUL_SRC"] = int(OperandSource.MEMORY)
        operands = {"BS_MUL": fp16_words(slopes)}
    words = fp16_words(np.asarray(slope, np.float32))
    check = Fp16Check(node, {1: fp16_values(words).astype(np.float32)})
    return _layer(ctx, node, op="sdp_fp16_prelu", fields=fields, operands=operands, check=check,
                  note="SDP BS PReLU")  # fmt: skip


def lower_batchnorm_fp16(ctx: LoweringContext, node: Node) -> Fp16SdpLayer:
    """BatchNormalization (not folded into a conv) -> BS MUL ``a`` + BN ALU SUM ``b``."""
    params = [channel_constant(ctx, node, n) for n in node.inputs[1:5]]
    a, b = batchnorm_affine(*params, node.attrs["epsilon"])
    aw, bw = fp16_words(a), fp16_words(b)
    fields = {
        "BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.MEMORY),
        "BN_BYPASS": 0, "BN_ALU_BYPASS": 0, "BN_ALU_ALGO": int(AluAlgo.SUM),
        "BN_ALU_SRC": int(OperandSource.MEMORY),
    }  # fmt: skip
    shape = (-1,) + (1,) * (len(ctx.shape(node.inputs[0])) - 2)  # per channel, axis 1
    a16, b16 = (fp16_values(v).astype(np.float32).reshape(shape) for v in (aw, bw))
    check = Fp16Check(node, kernel=functools.partial(_affine, a16, b16))
    note = "SDP BS MUL a, BN ALU SUM b (a x + b per channel, each step fp32)"
    return _layer(ctx, node, op="sdp_fp16_batchnorm", fields=fields,
                  operands={"BS_MUL": aw, "BN_ALU": bw}, check=check, note=note)  # fmt: skip


def _affine(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The reference of a standalone BatchNormalization: ``a x + b`` in float32."""
    return x * a + b
