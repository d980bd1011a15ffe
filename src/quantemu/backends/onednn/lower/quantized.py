"""What ``quantized::conv2d`` and ``quantized::linear`` share: weights, requantization, output.

Weights follow PyTorch's ``from_float``: per output channel symmetric s8 scales of
``PerChannelMinMaxObserver`` (``weight_scales``), codes ``clamp(rne(w ⊗ rr(s)), −128, 127)`` as
``torch.quantize_per_channel`` gives them; biases stay float32. A QDQ model's quantized weights
(``quant_overrides`` with ``values``) are taken as they are when PyTorch's scheme can hold them
(s8, zero point 0, per tensor or per output channel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from quantemu.backends.onednn.f32 import rr
from quantemu.backends.onednn.lower.activation import (
    activation_bounds,
    activation_suffix,
    cuts_low,
)
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.backends.onednn.params import Requantization
from quantemu.backends.onednn.quantize import weight_scales
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable

Q = TypeVar("Q", bound="QuantizedLayer")


@dataclass(frozen=True, eq=False, kw_only=True)
class QuantizedLayer(U8Layer):
    """A oneDNN int8 primitive and PyTorch's f32 requantization; ``lo``/``hi`` are the fused
    activation's codes (:func:`fused_activation`)."""

    #: PyTorch's op, ``quantized::{torch_op}``.
    torch_op: ClassVar[str] = ""
    weight: np.ndarray  # int8, output channels first
    bias: np.ndarray | None  # float32 (O,)
    lo: int
    hi: int
    fused: bool  # a fused activation (ReLU / Clip)

    def result(self, acc: np.ndarray, pairs: int, v: np.ndarray) -> LayerOutput:
        """The layer's output from the accumulators ``acc``, the count of saturated pair sums
        and the requantized binary32 values ``v``."""
        y, saturated = finish(v, self.lo, self.hi, self.fused)
        counters = {"pair_saturated": pairs, "output_saturated": saturated}
        return LayerOutput(QTensor(y, self.encoding), counters, {"acc": acc})


def quantized_weights(ctx: Context, node: Node, w: np.ndarray, *, stored_kn: bool = False):
    """``(int8 codes, scales)`` of weights ``w (O, ...)``: a QDQ override, else PyTorch's rule.

    ``stored_kn``: the file holds the weights as ``(K, N)`` (MatMul, Gemm with ``transB = 0``),
    so an override's values and axis are read transposed.
    """
    name = node.inputs[1]
    override = ctx.graph.quant_overrides.get(name)
    if override is not None and override.values is not None:
        values, zero = np.asarray(override.values), np.asarray(override.zero_point)
        if values.dtype != np.int8 or np.any(zero != 0):
            raise NotLowerable(
                f"weight {name} is {values.dtype} with zero point(s) "
                f"{zero.ravel()[:4].tolist()}: oneDNN takes s8 weights with zero point 0"
            )
        if override.axis not in (None, 1 if stored_kn else 0):
            raise NotLowerable(
                f"weight {name} is quantized along axis {override.axis}, not its output-channel "
                "axis"
            )
        values = values.T if stored_kn else values
        scales = np.broadcast_to(np.asarray(override.scale, np.float32).ravel(), (w.shape[0],))
        return frozen(values), scales
    scales = weight_scales(np.ascontiguousarray(w), axis=0)
    # torch.quantize_per_channel: rne(w ⊗ rr(s)) (binary32 product), clamped to s8.
    codes = w * rr(scales).reshape((-1,) + (1,) * (w.ndim - 1))
    np.rint(codes, out=codes)
    np.clip(codes, -128, 127, out=codes)
    return frozen(codes.astype(np.int8)), scales


def frozen(codes: np.ndarray) -> np.ndarray:
    """Read-only int8 codes that own their data: the backend caches what it derives from them."""
    if not (codes.dtype == np.int8 and codes.flags.owndata and codes.flags.c_contiguous):
        codes = np.array(codes, dtype=np.int8, order="C")
    codes.setflags(write=False)
    return codes


def quantized_layer(ctx: Context, node: Node, cls: type[Q], x: str, impls: str, **fields: Any) -> Q:
    """The layer ``cls`` of ``node`` as PyTorch's op (``quantized::conv2d`` or ``linear``, with
    ``_relu`` for a fused ReLU, then the kernel families ``impls``) on the activation ``x``:
    ``fields`` with ``bias`` as float32 ``(O,)`` and the fused activation's fields added."""
    bias = fields.pop("bias")
    return ctx.layer(
        cls,
        node,
        op=f"quantized::{cls.torch_op}{activation_suffix(node)} [{impls}]",
        inputs=(x,),
        bias=None if bias is None else np.array(bias, dtype=np.float32).reshape(-1),
        **fields,
        **fused_activation(ctx, node),
    )


def fused_activation(ctx: Context, node: Node) -> dict[str, Any]:
    """The ``lo``, ``hi`` and ``fused`` fields of a layer with ``node``'s fused activation."""
    lo, hi = activation_bounds(node, ctx.encodings[node.outputs[0]])
    return {"lo": lo, "hi": hi, "fused": cuts_low(node)}


def requantization(ctx: Context, x: str, out: str, scales: np.ndarray) -> Requantization:
    """The ``Requantization`` of a conv/linear from the tensors' encodings and weight scales."""
    ex, ey = ctx.encodings[x], ctx.encodings[out]
    return Requantization(ex.scale, ex.zp, tuple(scales.tolist()), ey.scale, ey.zp)


def finish(v: np.ndarray, lo: int, hi: int, fused: bool) -> tuple[np.ndarray, int]:
    """u8 codes of the binary32 values ``v`` (overwritten) clamped to ``[lo, hi]``, and the
    saturated count.

    ``clamp(rne(v), 0, 255)`` with NaN -> 0 (x86 ``cvtps2dq`` gives the integer indefinite,
    which the saturating packs send to 0), as ``to_8bit`` computes it: bounding ``v`` to
    ``[-0.5, 255]`` first changes no rounded value (``rne(-0.5) = 0``) and ``fmax`` maps NaN to
    the lower bound. ``fused``: a ReLU/Clip is fused; oneDNN applies it before the output
    scale, so what it cuts does not saturate at 0.
    """
    # rne(v) > 255 iff v >= 255.5 (the tie goes to 256); rne(v) < 0 iff v < -0.5. ``v`` is
    # the layer's own scratch buffer: clamped and rounded in place.
    saturated = np.count_nonzero(v >= 255.5) + (0 if fused else np.count_nonzero(v < -0.5))
    t = np.fmax(v, np.float32(-0.5), out=v)
    np.minimum(t, np.float32(255), out=t)
    np.rint(t, out=t)
    y = t.astype(np.uint8)
    if lo > 0 or hi < 255:
        np.clip(y, lo, hi, out=y)
    return y, int(saturated)
