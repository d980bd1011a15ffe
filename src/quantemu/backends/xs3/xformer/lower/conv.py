"""Convolutions as xcore-opt 1.4.2 builds them: ``XC_conv2d_v2``, or the TFLite op it reverts to.

Convolutions, depthwise convolutions and fully connected layers become ``XC_conv2d_v2``: the
raw int8 input (padding taps hold the input zero point, as the ``XC_pad`` xformer inserts) is
accumulated exactly against the int8 weights (:mod:`.columns`), and lib_nn's output transform
(VLSAT, VLMUL, VLADD, VLASHR, VDEPTH8) maps the sums to int8 with the parameters xcore-opt's
solver derives (:func:`solve`, :mod:`quantemu.backends.xs3.xformer.output_transform`). A conv
whose output-transform error exceeds xcore-opt's threshold is reverted to TFLite's CONV_2D (the
``tflite`` rule, run as TFLite-Micro), as the compiler does. A fused ReLU/ReLU6 is ignored when
the output zero point is -128 (the XC op only saturates) and otherwise applied as the
``XC_lookup`` xformer splits out (:mod:`.unfuse`); a ``RELU(MINIMUM(conv, 127))`` chain is
fused first (:mod:`.fuse`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.lower import columns, fuse
from quantemu.backends.xs3.xformer.lower.kept import kept_builtin
from quantemu.backends.xs3.xformer.lower.refusals import refuse_batch_matmul
from quantemu.backends.xs3.xformer.lower.unfuse import conv_table, looked_up
from quantemu.backends.xs3.xformer.ot_fused import FusedOt, frozen_operand, plan_ot, run_fused
from quantemu.backends.xs3.xformer.output_transform import (
    OtKind,
    OutputTransform,
    solve_output_transform,
)
from quantemu.backends.xs3.xformer.runtime import VlashrRounding, ot_channelwise, ot_group
from quantemu.graph.ir import Node
from quantemu.intmath import matmul_exact, sliding_windows
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor


@dataclass(frozen=True, eq=False, kw_only=True)
class XcConv2dLayer(Layer):
    """``XC_conv2d_v2``: exact sums over the zero-point-padded raw input, lib_nn's OT."""

    weights: np.ndarray  # OIHW int8 (depthwise: (C, 1, kh, kw))
    depthwise: bool
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]
    pad_value: int
    ot: OutputTransform
    rounding: VlashrRounding
    table: np.ndarray | None  # the split-out XC_lookup, if any
    encoding: LinearEncoding

    def __post_init__(self) -> None:
        """What depends only on the weights, derived once: the GEMM's frozen (K, O) matrix, the
        per-channel accumulator bound and the fused OT plan (not fields: the layer's
        description is unchanged)."""
        w = self.weights
        rows = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1)
        bound = rows * 128  # |acc[c]| <= sum_k |w[c, k]| * 128 for int8 inputs
        if self.depthwise:
            gemm = np.ascontiguousarray(w[:, 0], np.int32)  # int32 products, bound checked
        else:
            gemm = columns.gemm_weights(w)
        gemm.setflags(write=False)
        ot = self.ot
        if ot.kind is OtKind.GROUP:
            shift, left = np.full(ot.mul.shape, max(ot.initial_shr, 0)), max(-ot.initial_shr, 0)
        else:
            shift, left = ot.shift, 0
        plan = plan_ot(shift, ot.mul, ot.bias, initial_left=left, final_shr=ot.final_shr,
                       acc_bound=bound, rounding=self.rounding)  # fmt: skip
        object.__setattr__(self, "_gemm", gemm)
        object.__setattr__(self, "_acc_max", int(bound.max(initial=0)))
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_offset", None)
        if not self.depthwise:  # the offset-binary columns' extra sum, folded into the OT
            offset = columns.offset_correction(gemm)
            object.__setattr__(self, "_offset", offset)
            object.__setattr__(self, "_plan_offset", _offset_plan(plan, offset))

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Sums, then the group or channelwise output transform on channels-last values."""
        x = inputs[0].codes
        if x.ndim == 2:  # a fully connected layer: a 1x1 conv on (N, I, 1, 1)
            x = x[:, :, None, None]
        acc, offset = self._sums(x)  # (N, OH, OW, C), offset binary or not
        plan = self._plan_offset if offset else self._plan
        if plan is None:
            y = self._reference_ot(acc - self._offset if offset else acc).transpose(0, 3, 1, 2)
        else:  # the last pass writes NCHW directly
            n, oh, ow, c = acc.shape
            y = np.empty((n, c, oh, ow), np.int8)
            run_fused(plan, acc, out=y.transpose(0, 2, 3, 1), consume=True)
        if inputs[0].codes.ndim == 2:
            y = y[:, :, 0, 0]
        y, counters = looked_up(self.table, y)
        return LayerOutput(QTensor(np.ascontiguousarray(y, np.int8), self.encoding), counters)

    def _reference_ot(self, acc: np.ndarray) -> np.ndarray:
        ot = self.ot
        # |acc| <= taps * 128 * 128: SAT32 can only strike beyond 131072 taps per output
        flags = {"rounding": self.rounding, "acc_bound": self.taps * 128 * 128}
        if ot.kind is OtKind.GROUP:
            return ot_group(acc, ot.mul, ot.bias, ot.initial_shr, ot.final_shr, **flags)
        return ot_channelwise(acc, ot.shift, ot.mul, ot.bias, ot.final_shr, **flags)

    @property
    def taps(self) -> int:
        """Products summed per output (C_in / group * K_h * K_w)."""
        return int(np.prod(self.weights.shape[1:]))

    def _sums(self, x: np.ndarray) -> tuple[np.ndarray, bool]:
        """Exact sums, channels last ``(N, OH, OW, O)``, over int8 windows (no widening copy),
        and whether they are over the offset-binary columns (``+ self._offset`` per channel).
        Those come as the int8 engine's own int32 result where it computes them."""
        x = np.asarray(x, np.int8)
        kernel = self.weights.shape[2:]
        if not self.depthwise:
            geometry = {"strides": self.strides, "dilations": self.dilations, "pads": self.pads}
            found = columns.columns(x, kernel, pad_value=self.pad_value, **geometry)
            if found is not None:
                cols, (n, oh, ow) = found
                acc = matmul_exact(cols, self._gemm, a_max=255, allow_int32=True)
                return acc.reshape(n, oh, ow, self._gemm.shape[1]), True
        win = sliding_windows(
            x,
            kernel,
            strides=self.strides,
            dilations=self.dilations,
            pads=self.pads,
            pad_value=self.pad_value,
        ).transpose(0, 2, 3, 1, 4, 5)  # (N, OH, OW, C, kh, kw)
        n, oh, ow, c, kh, kw = win.shape
        if not self.depthwise:  # a cropping pad: the generic windows, rows in (kh, kw, C) order
            cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1)
            return matmul_exact(cols, self._gemm, a_max=128).reshape(n, oh, ow, -1), False
        # int32 products and sums are exact while the proved bound fits
        dtype = np.int32 if self._acc_max <= 2**31 - 1 else np.int64
        w = self._gemm.astype(dtype, copy=False)
        acc = np.zeros((n, oh, ow, c), dtype)
        for r in range(kh):  # a loop over taps, each a whole-tensor product
            for s in range(kw):
                acc += win[..., r, s] * w[:, r, s]
        return acc, False


def _offset_plan(plan: FusedOt | None, offset: np.ndarray) -> FusedOt | None:
    """``plan`` for sums over offset-binary columns: the correction joins the first add.

    Exact in int32: the plan proved ``128 * sum_k |w[k, o]| + first_add < 2**31`` and
    ``|offset[o]|`` is at most the former, so the new operand fits; the first add may wrap on
    the way, but its result, ``acc + first_add``, is the one the plan proved in range."""
    if plan is None or plan.zero:
        return plan
    first = np.asarray(plan.first_add, np.int64) - offset
    return dataclasses.replace(plan, first_add=frozen_operand(first))


def _padded_channels(count: int) -> int:
    """xformer pads output channels to a multiple of 4 (zero filters, scale 1, zero bias)."""
    return int(math.ceil(count / 4) * 4)


def solve(ctx, codes, bias, s_w, encodings) -> OutputTransform:
    """xcore-opt's output transform for ``codes`` (O, ...) with the padding channels it adds;
    ``encodings``: the input's and the output's."""
    e_in, e_out = encodings
    out = codes.shape[0]
    rows = codes.reshape(out, -1).astype(np.int8)
    full = _padded_channels(out)
    rows = np.concatenate([rows, np.zeros((full - out, rows.shape[1]), np.int8)])
    b = np.zeros(full, np.int64)
    if bias is not None:
        b[:out] = bias
    scales = np.concatenate([np.asarray(s_w, np.float32), np.ones(full - out, np.float32)])
    ot = solve_output_transform(
        rows,
        b,
        s_in=np.float32(e_in.scale),
        zp_in=int(e_in.zero_point),
        s_w=scales,
        s_out=np.float32(e_out.scale),
        zp_out=int(e_out.zero_point),
        threshold=ctx.options.conv_err_threshold,
    )
    keep = slice(0, out)
    return dataclasses.replace(ot, mul=ot.mul[keep], bias=ot.bias[keep], shift=ot.shift[keep])


def lower_xc_conv(ctx: TfliteContext, node: Node) -> Layer:
    """Conv / Gemm / MatMul as ``XC_conv2d_v2`` (or the reverted TFLite op)."""
    dense = node.op_type in ("Gemm", "MatMul")
    node = fuse.absorb(ctx, node)
    if node.op_type == "MatMul" and ctx.const(node.inputs[1]) is None:
        return refuse_batch_matmul(ctx, node)
    kept = kept_builtin(ctx, node)
    if kept:
        rule = tflite_rules.lower_dense if dense else tflite_rules.lower_conv
        return dataclasses.replace(rule(ctx, node), note=kept)
    if dense:
        base = tflite_rules.lower_dense(ctx, node)
        w = base.weights[:, :, None, None]
        geometry = {"strides": (1, 1), "dilations": (1, 1), "pads": (0, 0, 0, 0)}
        depthwise = False
    else:
        base = tflite_rules.lower_conv(ctx, node)
        w, depthwise = base.weights, base.depthwise
        geometry = {"strides": base.strides, "dilations": base.dilations, "pads": base.pads}
    e_in, e_out = ctx.encoding(node.inputs[0]), base.encoding
    _, s_w = ctx.weights(node, 1, axis=0 if not dense or node.attrs.get("transB") else 1)
    ot = solve(ctx, w if not depthwise else w[:, 0], base.bias, s_w, (e_in, e_out))
    if ot.kind is OtKind.REVERT_TO_TFLITE:
        note = f"xcore-opt reverts it to TFLite (OT error {ot.error:.3g} > threshold)"
        return dataclasses.replace(base, note=note, exact=True)
    return ctx.layer(
        XcConv2dLayer,
        node,
        op="XC_conv2d_v2",
        inputs=(node.inputs[0],),
        weights=np.ascontiguousarray(w, np.int8),
        depthwise=depthwise,
        pad_value=int(e_in.zero_point),
        ot=ot,
        rounding=ctx.options.vlashr,
        table=conv_table(node, e_out),
        encoding=e_out,
        **geometry,
    )


__all__ = ["XcConv2dLayer", "lower_xc_conv", "solve"]
