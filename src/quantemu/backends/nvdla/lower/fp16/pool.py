"""Pooling in FP16 on the PDP (:func:`~quantemu.backends.nvdla.pdp_fp16.pdp_fp16`).

The registers are the INT8 lowering's (:func:`~quantemu.backends.nvdla.quantize.program_pdp`:
the same kernel, stride and padding limits, ceil mode folded into the pads) with
``INPUT_DATA = FP16``, padding value 0 (FP16 has no offset) and the firmware's fp17
reciprocals (:data:`~quantemu.backends.nvdla.quantize.RECIP_KERNEL_FP17`). A global pool runs as
stages whose kernels multiply to the plane, each rounding to fp16. The PDP has no status
counters; quantemu counts the ±65504 and NaN output words. The threshold check is the seed's PDP
rule, with each output's largest window magnitude (for staged global pools: over the plane).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower.fp16.check import Fp16Check, fp16_values, pool_window_max
from quantemu.backends.nvdla.lower.pool import _check_geometry, _pool_pads, global_pool_stages
from quantemu.backends.nvdla.pdp_fp16 import check_supported, pdp_fp16
from quantemu.backends.nvdla.quantize import program_pdp
from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod, Precision
from quantemu.backends.nvdla.sdp_fp16 import nan_outputs, saturated_fp16
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext, NotLowerable


@dataclass(frozen=True, kw_only=True)
class Fp16PdpLayer(Layer):
    """PDP passes in FP16 over ``[N, C, H, W]`` fp16 words; ``window`` is the check's window
    (kernel, strides, pads), ``None`` for a whole plane."""

    encoding: Encoding
    stages: tuple[PdpRegisters, ...]
    window: tuple | None
    check: Fp16Check

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Pool stage by stage; count ±65504 and NaN words; the PDP threshold check."""
        y = np.asarray(inputs[0].codes)
        for regs in self.stages:
            y = pdp_fp16(y, regs).view(np.uint16)
        x = np.abs(fp16_values(inputs[0].codes).astype(np.float32))
        if self.window is None:
            big = x.max(axis=(2, 3), keepdims=True)
        else:
            kernel, strides, pads = self.window
            big = pool_window_max(x, kernel, strides=strides, pads=pads)
        counters = {"output_saturated": saturated_fp16(y), "nan_outputs": nan_outputs(y)}
        counters.update(self.check.window(y, inputs, np.broadcast_to(big, y.shape)))
        return LayerOutput(QTensor(y, self.encoding), counters)


def _layer(ctx: LoweringContext, node: Node, *, stages, method: PoolingMethod, window, note):
    return ctx.layer(Fp16PdpLayer, node, op="pdp_fp16_" + method.name.lower(),
                     inputs=node.inputs[:1], note=note,
                     encoding=ctx.new_encoding(node.outputs[0]), stages=tuple(stages),
                     window=window, check=Fp16Check(node))  # fmt: skip


def lower_pool_fp16(ctx: LoweringContext, node: Node) -> Fp16PdpLayer:
    """MaxPool / AveragePool -> one FP16 PDP pass."""
    a = node.attrs
    chw = ctx.shape(node.inputs[0])[1:]
    if tuple(a["dilations"]) != (1, 1):
        raise UnsupportedError(f"{node}: dilated pooling is not supported by the PDP")
    average = node.op_type == "AveragePool"
    pads = _pool_pads(node, chw, average)
    _check_geometry(node, a["kernel_shape"], a["strides"], pads)
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    kernel, strides = tuple(a["kernel_shape"]), tuple(a["strides"])
    regs = program_pdp(chw, kernel, stride=strides, pads=pads, method=method,
                       precision=Precision.FP16)  # fmt: skip
    check_supported(regs)  # what the cmod leaves undefined fails here, not at run time
    note = "fp17 sums, firmware fp17 reciprocals" if average else "fp16 word compare"
    return _layer(ctx, node, stages=(regs,), method=method, window=(kernel, strides, pads),
                  note=note)  # fmt: skip


def lower_global_pool_fp16(ctx: LoweringContext, node: Node) -> Fp16PdpLayer:
    """GlobalAveragePool / GlobalMaxPool -> FP16 PDP stages (or the CPU, noted)."""
    chw = ctx.shape(node.inputs[0])[1:]
    average = node.op_type == "GlobalAveragePool"
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    stages = global_pool_stages(chw, method, precision=Precision.FP16)
    if stages is None:
        raise NotLowerable(
            f"plane {chw[1]}x{chw[2]} has a prime factor above the PDP kernel limit 8"
        )
    note = f"{len(stages)} PDP stages" if len(stages) > 1 else ""
    if len(stages) > 1 and average:
        note += " (each rounds to fp16)"
    return _layer(ctx, node, stages=stages, method=method, window=None, note=note)
