"""Element-wise Add / Sub / Mul on the SDP Y (EW) unit.

The main input streams into the SDP as int8 codes; the other input is the EW memory operand,
read through the EW ALU (SUM) or MUL converter that :func:`~.quantize.ew_converter_fields`
programs (seed 001's ``ew_inv_cvt``), and the output converter requantizes.

* **SUM** (Add, Sub): the EW MUL multiplies the main stream by the register ``±2^k`` (a lift
  onto a finer grid, ``EW_TRUNCATE = 0``), the ALU converter brings the operand onto that grid
  (``±2^k s_b / s_a`` as int16 scale and truncate), and the output converter applies
  ``s_a / (2^k s_out)``. ``k`` is the largest value in ``[0, 14]`` with ``2^k s_b / s_a <=
  2^14``, so the operand is rounded to ``2^-k`` of the main input's step.
* **PROD** (Mul): the MUL converter passes the operand unchanged (PROD), the product of two int8
  codes is exact (``|a b| <= 2^14``), the output converter applies ``s_a s_b / s_out``.

nvdla/sw itself programs an element-wise SUM in the X1 unit with the raw codes of both inputs
and the output converter ``s_a / s_out`` (``SDPElementWiseOpNode``), which is only right when
both inputs share a scale; quantemu uses the EW converters instead so that unequal scales are
handled (the report header says so). A fused activation (ReLU etc.) cannot follow the Y unit in
the same pass (the X units come first), so it runs as a second SDP pass on the int8 result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower.context import NvdlaContext, f32
from quantemu.backends.nvdla.lower.sdp import (
    SdpStage,
    activation_stage,
    converter_fields,
    run_stages,
    sdp_counters,
)
from quantemu.backends.nvdla.quantize import ScaleSplit, ew_converter_fields, quantize_weights
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource, SdpRegisters
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

MAX_LIFT = 14


@dataclass(frozen=True, kw_only=True)
class EwLayer(Layer):
    """Add/Sub/Mul: main stream + EW operand in one SDP pass, then activation passes.

    ``main`` / ``other`` index ``inputs`` (or the constant operand ``constant``).
    """

    encoding: LinearEncoding
    main: int
    operand_name: str  # "EW_ALU" or "EW_MUL"
    constant: np.ndarray | None  # int8 codes of a constant operand (else the other input)
    stages: tuple[SdpStage, ...]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The EW pass (operand broadcast to the main input's shape) and the extra passes."""
        x = np.asarray(inputs[self.main].codes)
        other = self.constant if self.constant is not None else inputs[1 - self.main].codes
        first = self.stages[0].run(x, {self.operand_name: np.asarray(other)}, int8_out=True)
        y, rest = run_stages(self.stages[1:], first.y)
        counters = sdp_counters([first, *rest])
        return LayerOutput(QTensor(y.astype(np.int8, copy=False), self.encoding), counters)


def _lift(ratio: float) -> int:
    """The largest ``k`` in ``[0, 14]`` with ``2^k * ratio <= 2^14``."""
    return max(0, min(MAX_LIFT, MAX_LIFT - math.ceil(math.log2(ratio)))) if ratio > 0 else 0


def _sum_fields(s_main: float, s_op: float, s_out: float, sign_main: int, sign_op: int):
    k = _lift(s_op / s_main)
    # ew_inv_cvt for SUM: the operand (codes of s_op, SF = 1/s_op, negated for Sub) onto the
    # lifted main grid (SF = 2^k / s_main): factor sign * 2^k s_op / s_main.
    cvt = ew_converter_fields(
        "SUM", o_in=0.0, sf_in=2.0**k / s_main, o_ew=0.0, sf_ew=sign_op / s_op,
        which="ALU", how=ScaleSplit.EXACT,
    )  # fmt: skip
    fields = {
        "EW_BYPASS": 0,
        "EW_MUL_BYPASS": 0,
        "EW_MUL_SRC": int(OperandSource.REGISTER),
        "EW_MUL_OPERAND": (sign_main << k) % (1 << 32),
        "EW_TRUNCATE": 0,
        "EW_ALU_BYPASS": 0,
        "EW_ALU_ALGO": int(AluAlgo.SUM),
        "EW_ALU_SRC": int(OperandSource.MEMORY),
        **cvt,
    }
    fields.update(converter_fields(f32(s_main / (2.0**k * s_out)), None))
    return fields, "EW_ALU", k


def _prod_fields(s_main: float, s_op: float, s_out: float):
    # ew_inv_cvt for PROD: offset -o_ew * sf_ew = 0 and factor 1 (scale 2^14, truncate 14).
    cvt = ew_converter_fields(
        "PROD", o_in=0.0, sf_in=1 / s_main, o_ew=0.0, sf_ew=1 / s_op, which="MUL",
        how=ScaleSplit.EXACT,
    )  # fmt: skip
    fields = {
        "EW_BYPASS": 0,
        "EW_MUL_BYPASS": 0,
        "EW_MUL_SRC": int(OperandSource.MEMORY),
        "EW_TRUNCATE": 0,
        **cvt,
    }
    fields.update(converter_fields(f32(f32(s_main * s_op) / s_out), None))
    return fields, "EW_MUL", 0


def _constant_codes(value: np.ndarray) -> tuple[np.ndarray, float]:
    """A constant operand quantized like weights (``max|c| / 127``, half up, float32)."""
    q, s = quantize_weights(value if value.size else np.zeros(1, np.float32))
    return q.reshape(value.shape), s


def main_index(ctx: NvdlaContext, node: Node) -> int:
    """The input whose shape is the output's (the other one is broadcast as the operand)."""
    out_shape = ctx.shape(node.outputs[0])
    for i in (0, 1):
        if ctx.const(node.inputs[i]) is None and ctx.shape(node.inputs[i]) == out_shape:
            return i
    raise UnsupportedError(
        f"{node}: neither computed input has the output shape {out_shape}; the SDP streams one "
        "full-size input and broadcasts the other"
    )


def lower_ew(ctx: NvdlaContext, node: Node) -> EwLayer:
    """Add / Sub / Mul of two tensors (or a tensor and a constant) on SDP Y."""
    main = main_index(ctx, node)
    other = node.inputs[1 - main]
    constant = ctx.const(other)
    if constant is not None:
        codes, s_op = _constant_codes(np.asarray(constant, np.float32))
    else:
        codes, s_op = None, ctx.encoding(other).scale
    s_main, enc = ctx.encoding(node.inputs[main]).scale, ctx.new_encoding(node.outputs[0])
    if node.op_type == "Mul":
        fields, operand, k = _prod_fields(s_main, s_op, enc.scale)
    else:
        neg = node.op_type == "Sub"
        sign_main, sign_op = (1, -1 if neg else 1) if main == 0 else (-1 if neg else 1, 1)
        fields, operand, k = _sum_fields(s_main, s_op, enc.scale, sign_main, sign_op)
    stages = [SdpStage(SdpRegisters(**fields))]
    act = node.attrs.get("activation")
    if act is not None:
        stages.append(activation_stage(act, node.attrs, enc.scale, enc.scale))
    note = f"EW lift 2^{k}" if node.op_type != "Mul" else "EW PROD"
    note += f"; {act} in a second SDP pass" if act else ""
    note += "; constant operand quantized max|c|/127" if constant is not None else ""
    return ctx.layer(EwLayer, node, op="sdp_ew_" + ("prod" if node.op_type == "Mul" else "sum"),
                     note=note, encoding=enc, main=0 if constant is not None else main,
                     operand_name=operand, constant=codes, stages=tuple(stages))  # fmt: skip
