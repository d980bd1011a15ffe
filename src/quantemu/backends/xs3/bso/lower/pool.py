"""Pooling nodes: MaxPool, AveragePool and global average pooling, as XMOS's flow runs them.

tflite2xcore replaces TFLite's MAX_POOL_2D / AVERAGE_POOL_2D (VALID padding, C % 4 == 0, equal
input and output quantization) by lib_nn's ``maxpool2d`` / ``avgpool2d``, and MEAN over height
and width (C % 4 == 0) by ``avgpool2d_global``; anything else stays a TFLite-Micro reference
kernel (:mod:`.tflite_micro`). None of these lib_nn operators is in the conformance contract:

- max pooling is the maximum of int8 codes in every implementation (lib_nn, TFLite's reference,
  with padding positions never winning), so it is exact by construction;
- ``avgpool2d`` and ``avgpool2d_global`` are transcribed from lib_nn's C reference and
  tflite2xcore's parameter rules (2021 sources, not checked against lib_nn a5f0c8b and not
  covered by conformance vectors): those layers say so with ``exact=False``.

lib_nn ``avgpool2d``: a 2x2 window with stride 2 sums the four codes and rounds
``RSHR(sum, 2)``; any other window multiplies each code by an 8-bit ``scale`` ~ 2^shift / pixels
(``avgpool2d_calc_scale_shift``) and rounds ``RSHR(sum, shift)``; both clamp to
[lo, 127] (``vlsat_single_s8``; ``lo`` = -127 with symmetric saturation). ``avgpool2d_global``:
``acc = bias + sum(x * scale)`` in int32, then ``RSHR(acc, shift)`` clamped, with ``bias``,
``scale`` (64..127) and ``shift`` (0..24) from tflite2xcore's ``_bias_scale_shift``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.bso.lower.tflite_micro import lower_tflite_avgpool
from quantemu.backends.xs3.bso.output_stage import rshr
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.intmath import (
    saturate_count,
    saturate_symmetric_count,
    shift_right_round_half_up,
    sliding_windows,
    wrap,
)
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

LIBNN_NOTE = (
    "lib_nn {op} transcribed from XMOS's C reference and tflite2xcore (not a conformance-"
    "checked operator; not covered by conformance vectors)"
)


@dataclass(frozen=True)
class PoolGeometry:
    """Window, strides, dilations and pads of a pooling node, and its output size."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    out_hw: tuple[int, int]

    @classmethod
    def of(cls, ctx: Xs3Context, node: Node) -> PoolGeometry:
        """From a MaxPool/AveragePool node's normalized attributes and inferred output shape."""
        a = node.attrs
        out = ctx.shape(node.outputs[0])
        if not all(isinstance(d, int) for d in out[2:]):
            raise UnsupportedError(f"{node}: the output height and width must be known, got {out}")
        dil = tuple(a.get("dilations", (1, 1)))
        return cls(tuple(a["kernel_shape"]), tuple(a["strides"]), dil, tuple(a["pads"]), out[2:])

    def libnn(self, in_shape: tuple) -> bool:
        """True when tflite2xcore substitutes a lib_nn pool: VALID windows, no dilation,
        ``C % 4 == 0`` (``in_shape`` is the NCHW input shape)."""
        return self.valid(in_shape[2:]) and in_shape[1] % 4 == 0 and self.dilations == (1, 1)

    def spans(self) -> tuple[int, int]:
        """The input rows and columns the output windows cover, padding included."""
        parts = zip(self.out_hw, self.strides, self.kernel, self.dilations, strict=True)
        rows, cols = ((o - 1) * s + (k - 1) * d + 1 for o, s, k, d in parts)
        return rows, cols

    def valid(self, in_hw: tuple[int, int]) -> bool:
        """True when every window lies inside the image (TFLite's VALID padding)."""
        rows, cols = self.spans()
        return not any(self.pads) and rows <= in_hw[0] and cols <= in_hw[1]

    def taps(self, x: np.ndarray, fill: int):
        """Yield, for every kernel tap, the ``(N, C, Y_h, Y_w)`` values it reads.

        ``x`` is ``(N, C, H, W)``; positions outside the image (padding, or the overhang of
        ``ceil_mode``) read ``fill``. A loop over the few kernel taps, each step vectorized over
        every pixel and channel.
        """
        (y_h, y_w), (top, left) = self.out_hw, self.pads[:2]
        rows, cols = self.spans()
        # Bottom and right: as far as the windows reach (ceil_mode may reach past the pads).
        pads = (top, left, max(rows - top - x.shape[2], 0), max(cols - left - x.shape[3], 0))
        windows = sliding_windows(
            x,
            self.kernel,
            strides=self.strides,
            dilations=self.dilations,
            pads=pads,
            pad_value=fill,
        )[:, :, :y_h, :y_w]
        for i in range(self.kernel[0]):
            for j in range(self.kernel[1]):
                yield windows[..., i, j]


@dataclass(frozen=True, eq=False, kw_only=True)
class MaxPoolLayer(Layer):
    """The maximum of int8 codes over each window; padding never wins (it reads -128)."""

    geometry: PoolGeometry

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Max over the kernel taps; the output keeps the input's encoding."""
        x = inputs[0].codes
        y = None
        for tap in self.geometry.taps(x, -128):
            y = tap.copy() if y is None else np.maximum(y, tap)
        return LayerOutput(QTensor(y, inputs[0].encoding), {})


def lower_maxpool(ctx: Xs3Context, node: Node) -> Layer:
    """MaxPool: lib_nn ``maxpool2d`` (VALID, C % 4 == 0) or TFLite's reference, both exact."""
    geometry = PoolGeometry.of(ctx, node)
    ctx.same_as_input(node)
    libnn = geometry.libnn(ctx.shape(node.inputs[0]))
    op = "maxpool2d" if libnn else "tflite:MAX_POOL_2D"
    note = (
        "max of int8 codes: exact in lib_nn maxpool2d and TFLite's reference alike (outside the "
        "conformance contract)"
    )
    return ctx.layer(
        MaxPoolLayer, node, op=op, inputs=node.inputs[:1], note=note, geometry=geometry
    )


def avgpool_scale_shift(pixels: int) -> tuple[int, int]:
    """lib_nn ``avgpool2d_calc_scale_shift``: ``(scale, shift)`` with scale/2^shift ~ 1/pixels.

    >>> avgpool_scale_shift(4), avgpool_scale_shift(9), avgpool_scale_shift(49)
    ((1, 2), (114, 10), (84, 12))
    """
    c = (pixels - 1).bit_length()  # ceil_log2
    if pixels == 1 << c:
        return 1, c
    q = 31 - c - 6
    g = 0x80000000 // pixels
    return shift_right_round_half_up(g, q), c + 6  # lib_nn's rounding down-shift


@dataclass(frozen=True, eq=False, kw_only=True)
class LibnnAvgPoolLayer(Layer):
    """lib_nn ``avgpool2d`` (module docstring); VALID windows only."""

    geometry: PoolGeometry
    scale: int
    shift: int
    low: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Sum of ``code * scale`` over the window (|sum| <= 49 * 128 * 127: no overflow)."""
        acc = None
        for tap in self.geometry.taps(inputs[0].codes, 0):
            term = tap.astype(np.int64) * self.scale
            acc = term if acc is None else acc + term
        y, counters = _clamp(rshr(acc, self.shift), self.low)
        return LayerOutput(QTensor(y, inputs[0].encoding), counters, {"acc": acc})


def _clamp(v: np.ndarray, low: int):
    sat = saturate_symmetric_count if low == -127 else saturate_count
    y, n = sat(v, 8)
    return y.astype(np.int8), {"output_saturated": int(n)}


def global_bias_scale_shift(enc_in: LinearEncoding, enc_out: LinearEncoding, pixels: int):
    """tflite2xcore's ``_bias_scale_shift`` for ``avgpool2d_global`` (module docstring).

    Returns ``(bias, scale, shift)``; out-of-range values are errors naming the limits.
    """
    rescaling = float(np.float32(enc_in.scale)) / float(np.float32(enc_out.scale))
    multiplier = rescaling / pixels
    scale = float(np.round(multiplier * 2.0 ** (7 - np.ceil(np.log2(multiplier)))))
    if scale == 128.0:
        scale /= 2
    shift = float(np.round(np.log2(scale / multiplier)))
    # The converter adds 0.5 to the bias ("because the tflite ref adds 0.5 to the bias").
    bias = np.round(
        (int(enc_out.zero_point) - int(enc_in.zero_point) * rescaling + 0.5) * 2.0**shift
    )
    if not (0 <= shift <= 24 and 64 <= scale <= 127):
        raise InvalidInputError(
            f"avgpool2d_global: shift = {shift:g} (needs 0..24) or scale = {scale:g} (needs "
            f"64..127) out of range for s_in/s_out = {rescaling!r} over {pixels} pixels"
        )
    return int(wrap(np.int64(bias), 32)), int(scale), int(shift)


@dataclass(frozen=True, eq=False, kw_only=True)
class LibnnGlobalAvgLayer(Layer):
    """lib_nn ``avgpool2d_global``: ``RSHR(bias + sum(x * scale), shift)`` per channel."""

    bias: int
    scale: int
    shift: int
    low: int
    encoding: LinearEncoding
    keepdims: bool = True

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The C adds in int32 (``int32_t acc = bias; acc += x * scale``): wraps are counted."""
        x = inputs[0].codes.astype(np.int64)
        # |sum| <= H*W * 128 * 127 and |bias| < 2^32: fits int64.
        exact = self.bias + (x * self.scale).sum(axis=(2, 3), keepdims=self.keepdims)
        acc = wrap(exact, 32)
        y, counters = _clamp(rshr(acc, self.shift), self.low)
        counters["acc_wrapped"] = int(np.count_nonzero(acc != exact))
        return LayerOutput(QTensor(y, self.encoding), counters, {"acc": acc})


def lower_avgpool(ctx: Xs3Context, node: Node, geometry: PoolGeometry) -> Layer:
    """AveragePool on lib_nn ``avgpool2d`` (where ``geometry.libnn`` holds)."""
    ctx.same_as_input(node)
    k_h, k_w = geometry.kernel
    if (k_h, k_w) == (2, 2) and geometry.strides == (2, 2):
        scale, shift = 1, 2  # avgpool2d_2x2: the plain sum, RSHR by 2
    else:
        scale, shift = avgpool_scale_shift(k_h * k_w)
    fields = {"geometry": geometry, "scale": scale, "shift": shift}
    return _libnn_pool(ctx, node, LibnnAvgPoolLayer, "avgpool2d", **fields)


def lower_average_pool(ctx: Xs3Context, node: Node) -> Layer:
    """AveragePool: lib_nn ``avgpool2d`` where tflite2xcore substitutes it (VALID, C % 4 == 0),
    else TFLite-Micro's AVERAGE_POOL_2D."""
    geometry = PoolGeometry.of(ctx, node)
    if geometry.libnn(ctx.shape(node.inputs[0])):
        return lower_avgpool(ctx, node, geometry)
    return lower_tflite_avgpool(ctx, node)


def lower_global_avgpool(ctx: Xs3Context, node: Node) -> Layer:
    """GlobalAveragePool (or ReduceMean over H, W) on ``avgpool2d_global`` when C % 4 == 0;
    other reductions and channel counts fall back to float."""
    if node.op_type == "ReduceMean" and tuple(node.attrs["axes"]) != (2, 3):
        raise NotLowerable("")  # TFLite's MEAN kernel: the plain fallback note
    shape = ctx.shape(node.inputs[0])
    keepdims = node.op_type == "GlobalAveragePool" or bool(node.attrs["keepdims"])
    if len(shape) != 4 or shape[1] % 4 or not all(isinstance(d, int) for d in shape[1:]):
        raise NotLowerable("C % 4 != 0: no lib_nn avgpool2d_global")
    enc_in, enc_out = ctx.encoding(node.inputs[0]), ctx.encoding(node.outputs[0])
    bias, scale, shift = global_bias_scale_shift(enc_in, enc_out, shape[2] * shape[3])
    fields = {"bias": bias, "scale": scale, "shift": shift, "keepdims": keepdims}
    return _libnn_pool(
        ctx, node, LibnnGlobalAvgLayer, "avgpool2d_global", encoding=enc_out, **fields
    )


def _libnn_pool(ctx: Xs3Context, node: Node, cls: type[Layer], op: str, **fields) -> Layer:
    """A transcribed lib_nn pooling layer ``op`` (``exact=False``) on the node's first input."""
    note, low = LIBNN_NOTE.format(op=op), ctx.options.output_low
    inputs = node.inputs[:1]
    return ctx.layer(cls, node, op=op, inputs=inputs, exact=False, note=note, low=low, **fields)
