"""Standalone activations on the SDP: ReLU / Clip / LeakyRelu / PRelu in the X units, Sigmoid /
Tanh through the programmed LUT of the Y unit.

A standalone piecewise-linear activation (one the optimize pass could not fuse into its
producer) is one SDP pass over the int8 codes: ReLU in the BS unit's ReLU, Clip as BS ALU MAX
and BN ALU MIN with register operands, LeakyRelu as a BS PReLU with a register slope. Its output
keeps the input's scale unless a QDQ override fixes another one (then the output converter
rescales). PRelu with a per-channel constant slope is a BS PReLU with the slopes as int16
memory operands and a shared shift.

Sigmoid and Tanh read the int8 codes straight into the LUT (``in_scale = 1 / s_in``, so one
code is one LUT input step): LO linear over ``[-span, span]``, LE linear over twice that
(:func:`~..lut_program.sigmoid_lut`, :func:`~..lut_program.tanh_lut`; NVIDIA's compiler fills
no integer LUT, so the filling is quantemu's rule from seed 001). The table holds
``f(x) * 32767``; the output converter applies ``1 / (32767 s_out)``. The measured table error
is in the note.
"""

from __future__ import annotations

from quantemu.backends.nvdla.lower.context import NvdlaContext, f32
from quantemu.backends.nvdla.lower.sdp import (
    SdpLayer,
    SdpStage,
    activation_stage,
    converter_fields,
    prelu_slopes,
)
from quantemu.backends.nvdla.lut_program import sigmoid_lut, tanh_lut
from quantemu.backends.nvdla.quantize import ScaleSplit, split_scales
from quantemu.backends.nvdla.registers import OperandSource, SdpRegisters
from quantemu.graph.ir import Attrs, Node

LUT_OUT_SCALE = 2**15 - 1


def _fused_form(node: Node) -> tuple[str, Attrs]:
    """A standalone activation node as (fused kind, fused attributes)."""
    a = node.attrs
    if node.op_type == "Relu":
        return "relu", a
    if node.op_type == "LeakyRelu":
        return "leaky_relu", Attrs({"activation_alpha": a["alpha"]})
    return "clip", Attrs({"activation_min": a["min"], "activation_max": a["max"]})


def lower_activation(ctx: NvdlaContext, node: Node) -> SdpLayer:
    """Relu / Clip / LeakyRelu on int8 codes (X units), rescaled only under a QDQ override."""
    enc_in = ctx.encoding(node.inputs[0])
    enc = enc_in
    if node.outputs[0] in ctx.graph.quant_overrides:
        enc = ctx.new_encoding(node.outputs[0])
    kind, attrs = _fused_form(node)
    stage = activation_stage(kind, attrs, enc_in.scale, enc.scale, ctx.options.scale_split)
    note = "output keeps the input scale" if enc is enc_in else "rescaled to the QDQ scale"
    return ctx.layer(SdpLayer, node, op="sdp_x_" + kind, inputs=node.inputs[:1], note=note,
                     encoding=enc, stages=(stage,))  # fmt: skip


def lower_lut(ctx: NvdlaContext, node: Node) -> SdpLayer:
    """Sigmoid / Tanh -> SDP Y LUT + output converter."""
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    make = sigmoid_lut if node.op_type == "Sigmoid" else tanh_lut
    program, err = make(1.0 / s_in, LUT_OUT_SCALE)
    fields = {"EW_BYPASS": 0, "EW_LUT_BYPASS": 0, **program.fields}
    fields.update(converter_fields(f32(1.0 / (LUT_OUT_SCALE * f32(enc.scale))), None))
    stage = SdpStage(SdpRegisters(**fields), lut=program)
    err_lsb = err / (LUT_OUT_SCALE * enc.scale)
    note = (
        f"LUT filled by quantemu (compiler fills none for INT8): table error <= {err:.0f}/32767 "
        f"= {err_lsb:.3f} output LSB"
    )
    return ctx.layer(SdpLayer, node, op="sdp_lut_" + node.op_type.lower(),
                     inputs=node.inputs[:1], note=note, encoding=enc, stages=(stage,),
                     lut=True)  # fmt: skip


def lower_prelu(ctx: NvdlaContext, node: Node) -> SdpLayer:
    """PRelu with a constant per-channel slope -> BS PReLU (memory slopes, shared shift)."""
    slopes = prelu_slopes(ctx, node)
    scales, shift = split_scales(slopes, how=ScaleSplit.EXACT)
    fields = {
        "BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.MEMORY),
        "BS_MUL_PRELU": 1, "BS_MUL_SHIFT_VALUE": shift,
    }  # fmt: skip
    stage = SdpStage(SdpRegisters(**fields), {"BS_MUL": scales})
    return ctx.layer(SdpLayer, node, op="sdp_x_prelu", inputs=node.inputs[:1],
                     note="output keeps the input scale", encoding=ctx.encoding(node.inputs[0]),
                     stages=(stage,))  # fmt: skip
