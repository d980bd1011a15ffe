"""Pooling in FP16 on the PDP (:func:`~quantemu.backends.nvdla.fp16.pdp.pdp_fp16`).

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

from quantemu.backends.nvdla.fp16.lower.check import Fp16Check, fp16_values, pool_window_max
from quantemu.backends.nvdla.fp16.pdp import check_supported, pdp_fp16
from quantemu.backends.nvdla.fp16.sdp import nan_outputs, saturated_fp16
from quantemu.backends.nvdla.lower.pool import global_pool_program, pool_registers
from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod, Precision
from quantemu.graph.ir import Node
from quantemu.program import Encoding, Layer, LayerOutput, QTensor
from quantemu.program.lowering import LoweringContext


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
    regs = pool_registers(ctx, node, Precision.FP16)
    check_supported(regs)  # what the cmod leaves undefined fails here, not at run time
    g = regs.geometry()
    window = ((g.kernel_height, g.kernel_width), (g.stride_height, g.stride_width),
              (g.pad_top, g.pad_left, g.pad_bottom, g.pad_right))  # fmt: skip
    average = regs.method is PoolingMethod.AVERAGE
    note = "fp17 sums, firmware fp17 reciprocals" if average else "fp16 word compare"
    return _layer(ctx, node, stages=(regs,), method=regs.method, window=window, note=note)


def lower_global_pool_fp16(ctx: LoweringContext, node: Node) -> Fp16PdpLayer:
    """GlobalAveragePool / GlobalMaxPool -> FP16 PDP stages (or the CPU, noted)."""
    stages, method = global_pool_program(ctx, node, Precision.FP16)
    note = f"{len(stages)} PDP stages" if len(stages) > 1 else ""
    if len(stages) > 1 and method is PoolingMethod.AVERAGE:
        note += " (each rounds to fp16)"
    return _layer(ctx, node, stages=stages, method=method, window=None, note=note)
