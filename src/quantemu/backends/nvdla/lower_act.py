"""Standalone activations on the SDP: ReLU / Clip / LeakyRelu in the X units, Sigmoid / Tanh
through the programmed LUT of the Y unit.

A standalone piecewise-linear activation (one the optimize pass could not fuse into its
producer) is one SDP pass over the int8 codes: ReLU in the BS unit's ReLU, Clip as BS ALU MAX
and BN ALU MIN with register operands, LeakyRelu as a BS PReLU with a register slope. Its output
keeps the input's scale unless a QDQ override fixes another one (then the output converter
rescales).

A standalone BatchNormalization (one no conv absorbed) is the SDP's BS and BN units: BS MUL
multiplies the codes by the per-channel int16 ``scale_c`` (``scale_c 2^-shift ~= a_c s_in /
s_out``, shift shared, from the largest), BN ALU adds the per-channel offset ``b_c 2^shift /
s_out`` (int16 with ``BN_ALU_SHIFT_VALUE``, :func:`~.quantize.program_bn_mean`) and BN's
truncate divides by ``2^shift``. PRelu with a per-channel constant slope is a BS PReLU with the
slopes as int16 memory operands and a shared shift.

Sigmoid and Tanh read the int8 codes straight into the LUT (``in_scale = 1 / s_in``, so one
code is one LUT input step): LO linear over ``[-span, span]``, LE linear over twice that
(:func:`~.lut_program.sigmoid_lut`, :func:`~.lut_program.tanh_lut`; NVIDIA's compiler fills no
integer LUT, so the filling is quantemu's rule from seed 001). The table holds ``f(x) * 32767``;
the output converter applies ``1 / (32767 s_out)``. The measured table error is in the note.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower_scales import Context, f32
from quantemu.backends.nvdla.lower_sdp import (
    SdpStage,
    activation_stage,
    converter_fields,
    run_stages,
    sdp_counters,
)
from quantemu.backends.nvdla.lut_program import sigmoid_lut, tanh_lut
from quantemu.backends.nvdla.quantize import ScaleSplit, program_bn_mean, split_scales
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource, SdpRegisters
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Attrs, Node
from quantemu.graph.ops.normalize import batchnorm_affine
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

LUT_OUT_SCALE = 2**15 - 1


@dataclass(frozen=True, kw_only=True)
class SdpLayer(Layer):
    """One or more SDP passes over a single int8 input."""

    encoding: LinearEncoding
    stages: tuple[SdpStage, ...]
    lut: bool = False

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Run the passes; counters include the LUT ones when the LUT is active."""
        y, results = run_stages(self.stages, np.asarray(inputs[0].codes))
        counters = sdp_counters(results, lut=self.lut)
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), counters)


def _fused_form(node: Node) -> tuple[str, Attrs]:
    """A standalone activation node as (fused kind, fused attributes)."""
    a = node.attrs
    if node.op_type == "Relu":
        return "relu", a
    if node.op_type == "LeakyRelu":
        return "leaky_relu", Attrs({"activation_alpha": a["alpha"]})
    return "clip", Attrs({"activation_min": a["min"], "activation_max": a["max"]})


def lower_activation(node: Node, ctx: Context) -> SdpLayer:
    """Relu / Clip / LeakyRelu on int8 codes (X units), rescaled only under a QDQ override."""
    enc_in = ctx.encoding(node.inputs[0])
    enc = enc_in
    if node.outputs[0] in ctx.graph.quant_overrides:
        enc = ctx.new_encoding(node.outputs[0])
    kind, attrs = _fused_form(node)
    stage = activation_stage(kind, attrs, enc_in.scale, enc.scale, ctx.options.scale_split)
    note = "output keeps the input scale" if enc is enc_in else "rescaled to the QDQ scale"
    return SdpLayer(
        name=node.name,
        op="sdp_x_" + kind,
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        stages=(stage,),
    )


def lower_lut(node: Node, ctx: Context) -> SdpLayer:
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
    return SdpLayer(
        name=node.name,
        op="sdp_lut_" + node.op_type.lower(),
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        stages=(stage,),
        lut=True,
    )


def _channel_constant(node: Node, ctx: Context, name: str, channels: int) -> np.ndarray:
    """A constant input as one value per channel (axis 1), or a clear error."""
    value = ctx.initializer(name)
    shape = ctx.graph.tensors[node.inputs[0]].shape
    if value is None:
        raise UnsupportedError(f"{node}: {name!r} is computed; the SDP needs it constant")
    v = np.asarray(value, np.float32)
    trailing = v.shape[1:] if v.ndim == len(shape) - 1 else ()
    if v.size == 1 or (v.shape[:1] == (channels,) and all(d == 1 for d in trailing)):
        return np.broadcast_to(v.reshape(-1), (channels,)).astype(np.float32)
    raise UnsupportedError(
        f"{node}: {name!r} has shape {v.shape}; the SDP takes one value per channel "
        f"({channels},) or a scalar"
    )


def lower_batchnorm(node: Node, ctx: Context) -> SdpLayer:
    """BatchNormalization (not folded into a conv) -> BS MUL per channel + BN ALU + truncate."""
    channels = ctx.graph.tensors[node.inputs[0]].shape[1]
    params = [_channel_constant(node, ctx, n, channels) for n in node.inputs[1:5]]
    a, b = batchnorm_affine(*params, node.attrs["epsilon"])
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    factors = (np.float32(s_in) * a / np.float32(enc.scale)).astype(np.float32)
    scales, shift = split_scales(factors, how=ctx.options.scale_split)
    offsets, alu_shift = program_bn_mean(-b.astype(np.float64), 2.0**shift / enc.scale)
    fields = {
        "BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.MEMORY),
        "BN_BYPASS": 0, "BN_ALU_BYPASS": 0, "BN_ALU_ALGO": int(AluAlgo.SUM),
        "BN_ALU_SRC": int(OperandSource.MEMORY), "BN_ALU_SHIFT_VALUE": alu_shift,
        "BN_MUL_SHIFT_VALUE": shift,
    }  # fmt: skip
    stage = SdpStage(SdpRegisters(**fields), {"BS_MUL": scales, "BN_ALU": offsets})
    note = f"per-channel scale 2^-{shift}, offset << {alu_shift}"
    return SdpLayer(
        name=node.name,
        op="sdp_x_batchnorm",
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        stages=(stage,),
    )


def lower_prelu(node: Node, ctx: Context) -> SdpLayer:
    """PRelu with a constant per-channel slope -> BS PReLU (memory slopes, shared shift)."""
    channels = ctx.graph.tensors[node.inputs[0]].shape[1]
    slopes = _channel_constant(node, ctx, node.inputs[1], channels)
    scales, shift = split_scales(slopes, how=ScaleSplit.EXACT)
    fields = {
        "BS_BYPASS": 0, "BS_MUL_BYPASS": 0, "BS_MUL_SRC": int(OperandSource.MEMORY),
        "BS_MUL_PRELU": 1, "BS_MUL_SHIFT_VALUE": shift,
    }  # fmt: skip
    enc = ctx.encoding(node.inputs[0])
    stage = SdpStage(SdpRegisters(**fields), {"BS_MUL": scales})
    return SdpLayer(
        name=node.name,
        op="sdp_x_prelu",
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note="output keeps the input scale",
        encoding=enc,
        stages=(stage,),
    )
