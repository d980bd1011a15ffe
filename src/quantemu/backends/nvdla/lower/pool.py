"""Pooling on the PDP.

The PDP has no output converter: a pooled tensor keeps its input's codes and scale (the
calibrated range of the pooled tensor is not used). Kernels are 1..8 per side, strides 1..16,
padding 0..7 and smaller than the kernel; max/min ignore padding, average divides by the whole
kernel through the firmware reciprocals ``floor(2^16 / k)`` with padding value 0 (ONNX
``count_include_pad = 1``). A global pool whose plane exceeds the kernel limit runs as stages
whose kernels multiply to the plane (each average stage rounds half away from zero); a plane
with a prime factor above 8 falls back to float.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.pdp import pdp
from quantemu.backends.nvdla.quantize import program_pdp
from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod, Precision
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import LoweringContext, NotLowerable

MAX_KERNEL, MAX_STRIDE, MAX_PAD = 8, 16, 7


@dataclass(frozen=True, kw_only=True)
class PdpLayer(Layer):
    """One or more PDP passes with registers for one ``[C, H, W]`` image (batch = repeats)."""

    encoding: LinearEncoding
    stages: tuple[PdpRegisters, ...]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Pool stage by stage; the PDP has no status counters."""
        y = np.asarray(inputs[0].codes)
        for regs in self.stages:
            y = pdp(y, regs)
        return LayerOutput(QTensor(y.astype(np.int8, copy=False), self.encoding), {})


def _check_geometry(node: Node, kernel, strides, pads) -> None:
    problems = []
    if not all(1 <= k <= MAX_KERNEL for k in kernel):
        problems.append(f"kernel {tuple(kernel)} (PDP kernels are 1..{MAX_KERNEL})")
    if not all(1 <= s <= MAX_STRIDE for s in strides):
        problems.append(f"strides {tuple(strides)} (1..{MAX_STRIDE})")
    pt, pl, pb, pr = pads
    kh, kw = kernel
    if max(pads) > MAX_PAD or max(pt, pb) >= kh or max(pl, pr) >= kw:
        problems.append(f"pads {tuple(pads)} (0..{MAX_PAD} and smaller than the kernel)")
    if problems:
        raise UnsupportedError(f"{node}: the PDP cannot pool with {', '.join(problems)}")


def _ceil_pads(chw, kernel, strides, pads) -> tuple[int, int, int, int]:
    """Pads whose floor output size equals ONNX's ceil_mode size (extra bottom/right)."""
    (_, h, w), (kh, kw), (sh, sw) = chw, kernel, strides
    pt, pl, pb, pr = pads
    oh = -(-(h + pt + pb - kh) // sh) + 1
    ow = -(-(w + pl + pr - kw) // sw) + 1
    # ONNX drops a last window that would start in the bottom/right padding.
    oh -= (oh - 1) * sh >= h + pt
    ow -= (ow - 1) * sw >= w + pl
    return pt, pl, (oh - 1) * sh + kh - h - pt, (ow - 1) * sw + kw - w - pl


def _pool_pads(node: Node, chw, average: bool) -> tuple[int, int, int, int]:
    """The pads the PDP pools with (ceil_mode folded in), or why it cannot."""
    a = node.attrs
    pads = tuple(a["pads"])
    if a["ceil_mode"]:
        ceil = _ceil_pads(chw, a["kernel_shape"], a["strides"], pads)
        if average and ceil != pads:
            raise UnsupportedError(
                f"{node}: ceil_mode average pooling with a partial last window divides by a "
                "smaller count in ONNX; the PDP divides by the kernel size"
            )
        pads = ceil
    if average and any(pads) and not a["count_include_pad"]:
        raise UnsupportedError(
            f"{node}: count_include_pad=0 with padding {pads}; the PDP divides every window by "
            "the whole kernel (padding value 0), i.e. count_include_pad=1"
        )
    return pads


def pool_registers(ctx: LoweringContext, node: Node, precision: Precision = Precision.INT8):
    """The PDP registers of a MaxPool / AveragePool (ceil mode folded into the pads), or why the
    PDP cannot pool it."""
    a = node.attrs
    chw = ctx.shape(node.inputs[0])[1:]
    if tuple(a["dilations"]) != (1, 1):
        raise UnsupportedError(f"{node}: dilated pooling is not supported by the PDP")
    average = node.op_type == "AveragePool"
    pads = _pool_pads(node, chw, average)
    _check_geometry(node, a["kernel_shape"], a["strides"], pads)
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    return program_pdp(chw, tuple(a["kernel_shape"]), stride=tuple(a["strides"]), pads=pads,
                       method=method, precision=precision)  # fmt: skip


def lower_pool(ctx: NvdlaContext, node: Node) -> PdpLayer:
    """MaxPool / AveragePool -> one PDP pass."""
    regs = pool_registers(ctx, node)
    return _pdp_layer(ctx, node, (regs,), regs.method, "")


def _pdp_layer(ctx: NvdlaContext, node: Node, stages, method: PoolingMethod, note: str):
    enc = ctx.encoding(node.inputs[0])  # the PDP keeps its input's codes: no converter
    note = (note + "; " if note else "") + "output keeps the input scale (PDP has no converter)"
    return ctx.layer(PdpLayer, node, op="pdp_" + method.name.lower(), inputs=node.inputs[:1],
                     note=note, encoding=enc, stages=tuple(stages))  # fmt: skip


def plane_factors(size: int) -> list[int] | None:
    """Factors of ``size``, each in 1..8, largest first (``None`` if a prime factor is > 8)."""
    out = []
    while size > 1:
        f = next((d for d in range(MAX_KERNEL, 1, -1) if size % d == 0), None)
        if f is None:
            return None
        out.append(f)
        size //= f
    return out or [1]


def global_pool_stages(
    chw, method: PoolingMethod, precision: Precision = Precision.INT8
) -> list[PdpRegisters] | None:
    """PDP passes pooling a whole ``H x W`` plane; ``None`` when a side cannot be factored."""
    c, h, w = chw
    fh, fw = plane_factors(h), plane_factors(w)
    if fh is None or fw is None:
        return None
    n = max(len(fh), len(fw))
    fh, fw = fh + [1] * (n - len(fh)), fw + [1] * (n - len(fw))
    stages = []
    for kh, kw in zip(fh, fw, strict=True):
        stages.append(
            program_pdp((c, h, w), (kh, kw), stride=(kh, kw), method=method, precision=precision)
        )
        h, w = h // kh, w // kw
    return stages


def global_pool_program(
    ctx: LoweringContext, node: Node, precision: Precision = Precision.INT8
) -> tuple[list[PdpRegisters], PoolingMethod]:
    """The PDP stages of a GlobalAveragePool / GlobalMaxPool and its method;
    :class:`NotLowerable` (the CPU) when the plane cannot be factored."""
    chw = ctx.shape(node.inputs[0])[1:]
    average = node.op_type == "GlobalAveragePool"
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    stages = global_pool_stages(chw, method, precision)
    if stages is None:
        raise NotLowerable(
            f"plane {chw[1]}x{chw[2]} has a prime factor above the PDP kernel limit 8"
        )
    return stages, method


def lower_global_pool(ctx: NvdlaContext, node: Node) -> PdpLayer:
    """GlobalAveragePool / GlobalMaxPool -> PDP passes (or a float fallback, noted)."""
    stages, method = global_pool_program(ctx, node)
    average = method is PoolingMethod.AVERAGE
    note = f"{len(stages)} PDP stages" if len(stages) > 1 else ""
    if len(stages) > 1 and average:
        note += " (each rounds half away from zero)"
    return _pdp_layer(ctx, node, stages, method, note)
