"""Element-wise Add / Sub / Mul in FP16 on the SDP's EW unit.

The full-size input streams in as fp16 words (``Fp16ToFp32``); the other input (or a constant,
converted to fp16 words) is the EW memory operand. Add is EW ALU SUM, Mul is EW MUL: each one
cmod fp32 operation, then ``Fp32ToFp16``. Sub adds the negated subtrahend; negation by ``-1.0``
is exact in the SDP's multipliers:

- ``a - b`` with ``b`` streaming: BS MUL ``-1`` on ``b``, then EW SUM with ``a``;
- with ``a`` streaming: EW MUL ``-1`` then EW SUM ``b`` gives ``b - a``, and a second pass
  multiplies by ``-1`` (fp32 rounding to nearest even is symmetric, so this is ``a - b``);
- with a constant ``b``: EW SUM with the constant's negated fp16 words.

A fused activation runs in a further SDP pass (the X units come before EW in a pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.fp16.lower.check import Fp16Check, fp16_values
from quantemu.backends.nvdla.fp16.lower.sdp import (
    MINUS_ONE_FP16,
    MINUS_ONE_FP32,
    Fp16Pass,
    activation_fields,
    fp16_counters,
    fp16_pass,
    fp16_words,
    run_passes,
)
from quantemu.backends.nvdla.lower.elementwise import main_index
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource
from quantemu.graph.ir import Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext

_SUM = {"EW_BYPASS": 0, "EW_ALU_BYPASS": 0, "EW_ALU_ALGO": int(AluAlgo.SUM),
        "EW_ALU_SRC": int(OperandSource.MEMORY)}  # fmt: skip
_PROD = {"EW_BYPASS": 0, "EW_MUL_BYPASS": 0, "EW_MUL_SRC": int(OperandSource.MEMORY)}
_NEG_BS = {"BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.REGISTER),
           "BS_MUL_OPERAND": MINUS_ONE_FP16}  # fmt: skip
_NEG_EW = {"EW_MUL_BYPASS": 0, "EW_MUL_SRC": int(OperandSource.REGISTER),
           "EW_MUL_OPERAND": MINUS_ONE_FP32}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Fp16EwLayer(Layer):
    """The main stream ``inputs[main]`` with the EW operand (the other input or ``constant``,
    fp16 words) in the first pass, then the further passes."""

    encoding: Encoding
    main: int
    operand_name: str  # "EW_ALU" or "EW_MUL"
    constant: np.ndarray | None
    passes: tuple[Fp16Pass, ...]
    check: Fp16Check

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The passes; the counters; the SDP check."""
        x = np.asarray(inputs[self.main].codes)
        other = self.constant if self.constant is not None else inputs[1 - self.main].codes
        other = np.broadcast_to(np.asarray(other, dtype=np.uint16), x.shape)
        y, results = run_passes(self.passes, x, {self.operand_name: other})
        counters = fp16_counters(results)
        counters.update(self.check.sdp(y, inputs))
        return LayerOutput(QTensor(y, self.encoding), counters)


def _sub_passes(main: int, constant: bool) -> tuple[list[dict], str]:
    """The passes' fields for ``inputs[0] - inputs[1]`` with ``main`` streaming."""
    if constant:
        return [dict(_SUM)], "EW SUM with the negated constant"
    if main == 1:
        return [{**_NEG_BS, **_SUM}], "BS MUL -1 on the subtrahend, EW SUM"
    return [{**_NEG_EW, **_SUM}, dict(_NEG_BS)], "EW MUL -1, EW SUM, then a pass of BS MUL -1"


def lower_ew_fp16(ctx: LoweringContext, node: Node) -> Fp16EwLayer:
    """Add / Sub / Mul of two tensors (or a tensor and a constant) on the FP16 SDP."""
    main = main_index(ctx, node)
    other = node.inputs[1 - main]
    value = ctx.const(other)
    constant = None if value is None else fp16_words(value)
    if node.op_type == "Mul":
        fields, note = [dict(_PROD)], "EW MUL"
    elif node.op_type == "Add":
        fields, note = [dict(_SUM)], "EW SUM"
    else:
        fields, note = _sub_passes(main, constant is not None)
        if constant is not None:
            constant = constant ^ np.uint16(0x8000)  # exact negation of the fp16 words
    kind = node.attrs.get("activation")
    if kind is not None:
        fields.append(activation_fields(node.attrs, kind))
        note += f"; {kind} in a further SDP pass"
    constants = {}
    if value is not None:
        const16 = fp16_values(fp16_words(value)).astype(np.float32)
        constants[1 - main] = const16
    operand = "EW_MUL" if node.op_type == "Mul" else "EW_ALU"
    inputs = node.inputs[main : main + 1] if value is not None else node.inputs
    return ctx.layer(Fp16EwLayer, node, op="sdp_fp16_ew_" + ("prod" if operand == "EW_MUL"
                     else "sum"), inputs=inputs, note=note,
                     encoding=ctx.new_encoding(node.outputs[0]),
                     main=0 if value is not None else main, operand_name=operand,
                     constant=constant, passes=tuple(fp16_pass(f) for f in fields),
                     check=Fp16Check(node, constants))  # fmt: skip
