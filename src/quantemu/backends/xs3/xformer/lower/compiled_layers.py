"""The layers of a model compiled by xcore-opt 1.4.2, one per XC op (lib_nn's reference C).

The rules that build them from ``TfliteCustom`` nodes are in :mod:`.compiled`. Codes are NHWC,
batch first; an operand that is a constant of the file (or a broadcast constant) has batch 1 and
broadcasts against the others. Facts: ``notes/xformer.md`` sections 2 and 3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.xformer.compiled import XcConv2dV2, XcPad
from quantemu.backends.xs3.xformer.mul import XcMulParams, xc_mul_host
from quantemu.backends.xs3.xformer.ot_fused import plan_ot, run_fused
from quantemu.backends.xs3.xformer.output_transform import OtKind
from quantemu.backends.xs3.xformer.runtime import VlashrRounding, ot_channelwise, ot_group
from quantemu.intmath import (
    matmul_exact,
    saturate,
    shift_right_round_half_up,
    sliding_windows,
)
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

NOTE = "as compiled by xcore-opt 1.4.2: parameters read from the file"


def _per_sample(codes: np.ndarray, shape: tuple) -> np.ndarray:
    """``codes`` (batch first) as ``(N, *shape)``, the file's per-sample shape."""
    return codes.reshape(codes.shape[0], *shape)


@dataclass(frozen=True, eq=False, kw_only=True)
class CompiledLayer(Layer):
    """A compiled XC op: the output has the file's per-sample shape ``out_shape``."""

    out_shape: tuple[int, ...]
    encoding: LinearEncoding
    # per run-time operand of the op: a constant's codes (batch 1), or None where it is fed
    constants: tuple[np.ndarray | None, ...] = ()

    def _operands(self, inputs: list[QTensor]) -> list[np.ndarray]:
        """Every operand's codes as ``(batch, bytes)`` (the constants in their places, batch
        1), so that element-wise ops broadcast a constant over the samples."""
        fed = iter(inputs)
        codes = [c if c is not None else next(fed).codes for c in self.constants] or [
            t.codes for t in inputs
        ]
        return [c.reshape(c.shape[0], -1) for c in codes]

    def _out(self, y: np.ndarray, counters=None) -> LayerOutput:
        y = np.ascontiguousarray(_per_sample(y, self.out_shape), np.int8)
        return LayerOutput(QTensor(y, self.encoding), counters or {})


@dataclass(frozen=True, eq=False, kw_only=True)
class XcConvCompiledLayer(CompiledLayer):
    """``XC_conv2d_v2`` with the file's weights, geometry and output transform."""

    params: XcConv2dV2
    rounding: VlashrRounding

    def __post_init__(self) -> None:
        """The weight-only state, derived once (not a field): the frozen GEMM matrix, and the
        fused OT planned from the per-channel bound ``|acc[c]| <= 128 * sum_k |w[c, k]|``."""
        p = self.params
        rows = np.asarray(p.rows(), np.int64)
        gemm = None
        if not p.kernel_type.depthwise:  # an owning read-only copy: matmul_exact caches on it
            gemm = p.weights.reshape(p.weights.shape[0], -1).T.astype(np.int8, copy=True)
            gemm.setflags(write=False)
        group = p.ot_kind is OtKind.GROUP
        shift = np.full(p.mul.shape, max(p.initial_shr, 0)) if group else p.shift
        plan = plan_ot(
            shift,
            p.mul,
            p.bias,
            initial_left=max(-p.initial_shr, 0) if group else 0,
            final_shr=p.final_shr,
            acc_bound=128 * np.abs(rows).sum(axis=1),
            rounding=self.rounding,
        )
        object.__setattr__(self, "_gemm", gemm)
        object.__setattr__(self, "_plan", plan)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Exact sums, then lib_nn's OT on channels-last accumulators (fused where proved)."""
        p = self.params
        x = _per_sample(inputs[0].codes, p.input_shape[1:])  # an FC sees (1, 1, C_in)
        acc = conv_sums(x, p, self._gemm)
        if self._plan is not None:
            return self._out(run_fused(self._plan, acc))
        if p.ot_kind is OtKind.GROUP:
            y = ot_group(acc, p.mul, p.bias, p.initial_shr, p.final_shr, rounding=self.rounding)
        else:
            y = ot_channelwise(acc, p.shift, p.mul, p.bias, p.final_shr, rounding=self.rounding)
        return self._out(y)


def conv_sums(x: np.ndarray, p: XcConv2dV2, gemm: np.ndarray | None = None) -> np.ndarray:
    """``acc[n, oh, ow, c]``: the exact sums of the NHWC int8 ``x`` over ``p``'s windows
    (``gemm``: the weights as a frozen ``(K, C_out)`` matrix, if the caller keeps one)."""
    win = sliding_windows(
        np.asarray(x, np.int8),
        p.kernel,
        strides=p.stride,
        dilations=p.dilation,
        pads=p.padding,
        pad_value=p.pad_value,
        axes=(1, 2),
    )  # (N, OH, OW, C, kh, kw)
    n, oh, ow, c, kh, kw = win.shape
    if p.kernel_type.depthwise:
        w = p.weights[0].astype(np.int64)  # (kh, kw, C)
        acc = np.zeros((n, oh, ow, c), np.int64)  # |acc| <= kh*kw*128*128
        for r in range(kh):  # a loop over taps, each a whole-tensor product
            for s in range(kw):
                acc += win[..., r, s] * w[r, s]
        return acc
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * c)
    if gemm is None:
        gemm = p.weights.reshape(p.weights.shape[0], -1).T  # OHWI, as the columns
    return matmul_exact(cols, gemm, a_max=128).reshape(n, oh, ow, -1)


@dataclass(frozen=True, eq=False, kw_only=True)
class XcPadLayer(CompiledLayer):
    """``XC_pad``: each sample's bytes placed into a frame of the fill byte."""

    pad: XcPad

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """One gather index for every sample (the byte layout is the same for all)."""
        p = self.pad
        flat = inputs[0].codes.reshape(inputs[0].codes.shape[0], -1)
        rows = p.copies + 1
        idx = p.start + (np.arange(rows)[:, None] * (p.size + p.pad_size) + np.arange(p.size))
        out = np.full((flat.shape[0], int(np.prod(self.out_shape))), p.value, np.int8)
        out[:, idx.reshape(-1)] = flat
        return self._out(out)


@dataclass(frozen=True, eq=False, kw_only=True)
class XcPadTo4Layer(CompiledLayer):
    """``XC_pad_3_to_4`` / ``XC_pad_1_to_4``: every ``depth``-byte pixel followed by the pad
    byte up to 4 bytes."""

    value: int
    depth: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Append ``4 - depth`` channels of the pad byte."""
        x = inputs[0].codes.reshape(inputs[0].codes.shape[0], -1, self.depth)
        fill = np.full((*x.shape[:2], 4 - self.depth), self.value, np.int8)
        return self._out(np.concatenate([x, fill], axis=2))


@dataclass(frozen=True, eq=False, kw_only=True)
class XcSliceLayer(CompiledLayer):
    """``XC_slice`` / ``XC_no_op``: the bytes at ``index`` of each sample (all of them, in
    order, for the no-op)."""

    index: np.ndarray | None

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """A gather of each sample's bytes."""
        flat = inputs[0].codes.reshape(inputs[0].codes.shape[0], -1)
        return self._out(flat if self.index is None else flat[:, self.index])


@dataclass(frozen=True, eq=False, kw_only=True)
class XcAddLayer(CompiledLayer):
    """``XC_add`` (lib_nn ``add_elementwise``), ADD and SUB (``m2 < 0``)."""

    m1: int
    m2: int
    bias: int
    shift: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """``clamp(round_half_up((bias + x1*m1 + x2*m2) / 2**shift), -128, 127)``."""
        x1, x2 = (c.astype(np.int64) for c in self._operands(inputs))
        acc = self.bias + x1 * self.m1 + x2 * self.m2  # |.| < 2**31: int16 factors, int32 bias
        y = shift_right_round_half_up(acc, self.shift)
        saturated = int(np.count_nonzero((y < -128) | (y > 127)))
        return self._out(saturate(y, 8), {"output_saturated": saturated})


@dataclass(frozen=True, eq=False, kw_only=True)
class XcLookupLayer(CompiledLayer):
    """``XC_lookup`` (lib_nn ``lookup8``): ``table[uint8(x)]``."""

    table: np.ndarray

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Index the table by the codes' bit patterns."""
        return self._out(self.table[inputs[0].codes.view(np.uint8)])


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMeanLayer(CompiledLayer):
    """``XC_mean`` (lib_nn ``mean_int8``) over the middle axis of ``(start, mean, end)``."""

    dims: tuple[int, int, int]
    zp_in: float
    zp_out: float
    scale_mul: float

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """int32 sum from ``-zp_in * mean``; float32 multiply-add; clamp; ties away from 0."""
        start, mean, end = self.dims
        x = inputs[0].codes.reshape(inputs[0].codes.shape[0], start, mean, end)
        acc = int(-self.zp_in * mean) + x.sum(axis=2, dtype=np.int64)  # int32 in the C
        q = acc.astype(np.float32) * np.float32(self.scale_mul) + np.float32(self.zp_out)
        q = np.clip(q, np.float32(-128.0), np.float32(127.0)).astype(np.float64)
        y = np.where(q >= 0, np.floor(q + 0.5), np.ceil(q - 0.5))  # exact: |q| <= 128
        return self._out(y.astype(np.int8))


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMaxPoolLayer(CompiledLayer):
    """``XC_maxpool2d``: the maximum raw code of each VALID window (no requantization)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """A maximum over the window's taps."""
        win = sliding_windows(inputs[0].codes, self.kernel, strides=self.stride, axes=(1, 2))
        return self._out(win.max(axis=(-2, -1)))


@dataclass(frozen=True, eq=False, kw_only=True)
class XcMulLayer(CompiledLayer):
    """``XC_mul`` with the ``nn_mul_params_t`` read from the file, run as the host interpreter
    runs it (:func:`quantemu.backends.xs3.xformer.mul.xc_mul_host`, the int8 path's kernel)."""

    params: XcMulParams

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """lib_nn's ``mul_elementwise_ref`` on the two operands."""
        x1, x2 = (c.astype(np.int64) for c in self._operands(inputs))
        return self._out(xc_mul_host(x1, x2, self.params))


@dataclass(frozen=True, eq=False, kw_only=True)
class XcConcatLayer(CompiledLayer):
    """``XC_concat``: for each of ``copies`` outer positions, ``sizes[k]`` bytes of each
    operand ``k`` in turn."""

    copies: int
    sizes: tuple[int, ...]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Operands as ``(N, copies, size_k)``, joined on the last axis."""
        ops = self._operands(inputs)
        n = max(c.shape[0] for c in ops)
        parts = [
            np.broadcast_to(c.reshape(c.shape[0], self.copies, s), (n, self.copies, s))
            for c, s in zip(ops, self.sizes, strict=True)
        ]
        return self._out(np.concatenate(parts, axis=2))


@dataclass(frozen=True, eq=False, kw_only=True)
class XcBroadcastLayer(CompiledLayer):
    """``XC_broadcast``: each of ``outer`` blocks of ``size`` bytes repeated ``copies`` times
    (the input viewed ``(outer, 1, size)``, the output ``(outer, copies, size)``)."""

    outer: int
    copies: int
    size: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """A repeat of each block."""
        (x,) = self._operands(inputs)
        x = x.reshape(x.shape[0], self.outer, 1, self.size)
        return self._out(np.repeat(x, self.copies, axis=2))
