"""Pooling on the PDP and LRN on the CDP.

The PDP has no output converter: a pooled tensor keeps its input's codes and scale (the
calibrated range of the pooled tensor is not used). Kernels are 1..8 per side, strides 1..16,
padding 0..7 and smaller than the kernel; max/min ignore padding, average divides by the whole
kernel through the firmware reciprocals ``floor(2^16 / k)`` with padding value 0 (ONNX
``count_include_pad = 1``). A global pool whose plane exceeds the kernel limit runs as stages
whose kernels multiply to the plane (each average stage rounds half away from zero); a plane
with a prime factor above 8 falls back to float.

LRN runs on the CDP: input converter to ``x * 2^m`` (9 bits), square sum over the window, the
LUT ``(k + alpha/size * ss)^-beta`` (quantemu's LE-exponential / LO-linear filling, as NVIDIA's
compiler fills no integer LUT), multiply by the centre, output converter to int8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.cdp import cdp
from quantemu.backends.nvdla.lower_scales import Context
from quantemu.backends.nvdla.lut_program import LutProgram, lrn_lut
from quantemu.backends.nvdla.pdp import pdp
from quantemu.backends.nvdla.quantize import ScaleSplit, cdp_converter_fields, program_pdp
from quantemu.backends.nvdla.registers import CdpRegisters, PdpRegisters, PoolingMethod
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

MAX_KERNEL, MAX_STRIDE, MAX_PAD = 8, 16, 7
LRN_OUT_SCALE = 2**14


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
        return LayerOutput(QTensor(y.astype(np.int8), self.encoding), {})


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


def _ceil_pads(node: Node, chw, kernel, strides, pads) -> tuple[int, int, int, int]:
    """Pads whose floor output size equals ONNX's ceil_mode size (extra bottom/right)."""
    (_, h, w), (kh, kw), (sh, sw) = chw, kernel, strides
    pt, pl, pb, pr = pads
    oh = -(-(h + pt + pb - kh) // sh) + 1
    ow = -(-(w + pl + pr - kw) // sw) + 1
    # ONNX drops a last window that would start in the bottom/right padding.
    oh -= (oh - 1) * sh >= h + pt
    ow -= (ow - 1) * sw >= w + pl
    return pt, pl, (oh - 1) * sh + kh - h - pt, (ow - 1) * sw + kw - w - pl


def lower_pool(node: Node, ctx: Context) -> PdpLayer:
    """MaxPool / AveragePool -> one PDP pass."""
    a = node.attrs
    x = ctx.graph.tensors[node.inputs[0]]
    chw = tuple(x.shape[1:])
    if tuple(a["dilations"]) != (1, 1):
        raise UnsupportedError(f"{node}: dilated pooling is not supported by the PDP")
    average = node.op_type == "AveragePool"
    pads = tuple(a["pads"])
    if a["ceil_mode"]:
        ceil = _ceil_pads(node, chw, a["kernel_shape"], a["strides"], pads)
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
    _check_geometry(node, a["kernel_shape"], a["strides"], pads)
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    regs = program_pdp(chw, tuple(a["kernel_shape"]), stride=tuple(a["strides"]), pads=pads,
                       method=method)  # fmt: skip
    return _pdp_layer(node, ctx, (regs,), "pdp_" + method.name.lower(), "")


def _pdp_layer(node: Node, ctx: Context, stages, op: str, note: str) -> PdpLayer:
    enc = ctx.encoding(node.inputs[0])  # the PDP keeps its input's codes: no converter
    note = (note + "; " if note else "") + "output keeps the input scale (PDP has no converter)"
    return PdpLayer(
        name=node.name,
        op=op,
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        stages=tuple(stages),
    )


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


def global_pool_stages(node: Node, chw, method: PoolingMethod) -> list[PdpRegisters] | None:
    """PDP passes pooling a whole ``H x W`` plane; ``None`` when a side cannot be factored."""
    c, h, w = chw
    fh, fw = plane_factors(h), plane_factors(w)
    if fh is None or fw is None:
        return None
    n = max(len(fh), len(fw))
    fh, fw = fh + [1] * (n - len(fh)), fw + [1] * (n - len(fw))
    stages = []
    for kh, kw in zip(fh, fw, strict=True):
        stages.append(program_pdp((c, h, w), (kh, kw), stride=(kh, kw), method=method))
        h, w = h // kh, w // kw
    return stages


def lower_global_pool(node: Node, ctx: Context) -> Layer:
    """GlobalAveragePool / GlobalMaxPool -> PDP passes (or a float fallback, noted)."""
    from quantemu.backends.nvdla.lower_misc import float_fallback  # noqa: PLC0415 (cycle)

    chw = tuple(ctx.graph.tensors[node.inputs[0]].shape[1:])
    average = node.op_type == "GlobalAveragePool"
    method = PoolingMethod.AVERAGE if average else PoolingMethod.MAX
    stages = global_pool_stages(node, chw, method)
    if stages is None:
        return float_fallback(
            node, ctx, f"plane {chw[1]}x{chw[2]} has a prime factor above the PDP kernel limit 8"
        )
    note = f"{len(stages)} PDP stages" if len(stages) > 1 else ""
    if len(stages) > 1 and average:
        note += " (each rounds half away from zero)"
    return _pdp_layer(node, ctx, stages, "pdp_" + method.name.lower(), note)


@dataclass(frozen=True, kw_only=True)
class CdpLayer(Layer):
    """LRN on the CDP: registers and LUT tables derived at lowering time."""

    encoding: LinearEncoding
    regs: CdpRegisters
    lut: LutProgram

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The CDP over the channel axis (1) of the whole batch."""
        r = cdp(inputs[0].codes, self.regs, self.lut.le, self.lut.lo, axis=1)
        counters = {
            "output_saturated": r.OUT_SATURATION,
            "lut_underflow": r.PERF_LUT_UFLOW,
            "lut_overflow": r.PERF_LUT_OFLOW,
            "lut_hybrid": r.PERF_LUT_HYBRID,
            "lut_le_hit": r.PERF_LUT_LE_HIT,
            "lut_lo_hit": r.PERF_LUT_LO_HIT,
        }
        return LayerOutput(QTensor(np.asarray(r.y, np.int8), self.encoding), counters)


def lower_lrn(node: Node, ctx: Context) -> CdpLayer:
    """LRN -> CDP with converters from seed 001's equations and the LRN LUT."""
    a = node.attrs
    size = int(a["size"])
    if size not in (3, 5, 7, 9):
        raise UnsupportedError(f"{node}: LRN size {size}; the CDP sums 3, 5, 7 or 9 channels")
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    # The input converter output is 9 bits in INT8: x * 2^m must stay within +-255.
    m = math.floor(math.log2(255.0 / (128 * s_in)))
    lut, err = lrn_lut(m=m, size=size, alpha=float(a["alpha"]), beta=float(a["beta"]),
                       k=float(a["bias"]), out_scale=LRN_OUT_SCALE)  # fmt: skip
    fields = cdp_converter_fields(
        o_in=0.0, sf_in=1 / s_in, m=m, sf_lut=LRN_OUT_SCALE, o_out=0.0, sf_out=1 / enc.scale,
        how=ScaleSplit.EXACT,
    )  # fmt: skip
    regs = lut.registers(INPUT_DATA_TYPE=0, NORMALZ_LEN=size // 2 - 1, **fields)
    note = f"LUT filled by quantemu (compiler fills none for INT8): max error {err:.0f} of 2^14"
    return CdpLayer(
        name=node.name,
        op="cdp_lrn",
        inputs=(node.inputs[0],),
        output=node.outputs[0],
        exact=True,
        note=note,
        encoding=enc,
        regs=regs,
        lut=lut,
    )
