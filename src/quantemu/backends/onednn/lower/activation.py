"""Activations: Relu / Clip as ATen's quantized clamp, and the fused activations of other layers.

A clamp on ``quint8`` codes keeps its input's qparams; its bounds are ATen's ``quantize_val`` of
the float bounds (ReLU: the zero point). The same bounds serve a ReLU or Clip fused into a
convolution, linear or add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding, quantize_val
from quantemu.backends.onednn.f32 import f32, rr
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


def _clamp_codes(bound: float, enc: TorchU8Encoding) -> int:
    """ATen's quantized clamp bound: ``quantize_val`` of the float bound."""
    return int(quantize_val(np.float32(bound), rr(f32(enc.scale)), enc.zp))


def activation_bounds(node: Node, enc: TorchU8Encoding) -> tuple[int, int]:
    """Codes ``[lo, hi]`` a fused activation leaves: ReLU ``[zp, 255]``; Clip its bounds.

    A Clip is ATen's quantized clamp, ``quantize_val`` of each bound; a QDQ pair's saturation
    (a Clip to exactly the u8 range) gives ``[0, 255]``, i.e. nothing.
    """
    kind = node.attrs.get("activation")
    if kind is None:
        return 0, 255
    if kind == "relu":
        return enc.zp, 255
    if kind == "clip":
        a = node.attrs
        return _clamp_codes(a["activation_min"], enc), _clamp_codes(a["activation_max"], enc)
    raise NotLowerable(f"fused activation {kind!r} has no quantized PyTorch counterpart here")


def cuts_low(node: Node) -> bool:
    """True when a fused activation removes negative values (ReLU, a Clip from >= 0).

    What it cuts is then not counted as saturation; a Q/DQ pair's Clip (from a negative
    bound) is the saturation itself.
    """
    kind = node.attrs.get("activation")
    return kind == "relu" or (kind == "clip" and node.attrs["activation_min"] >= 0)


def activation_suffix(node: Node) -> str:
    """``_relu`` for a fused ReLU (PyTorch's op name), else ``""``."""
    return "_relu" if node.attrs.get("activation") == "relu" else ""


@dataclass(frozen=True, eq=False, kw_only=True)
class ClampLayer(U8Layer):
    """Quantized ``relu`` / ``clamp`` / ``hardtanh``: codes clamped to ``[lo, hi]``, qparams kept.

    ``lo``/``hi`` are ATen's ``quantize_val`` of the float bounds (ReLU: the zero point).
    """

    lo: int
    hi: int

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        y = np.clip(inputs[0].codes, self.lo, self.hi).astype(np.uint8)
        return LayerOutput(QTensor(y, self.encoding))


def lower_clamp(ctx: Context, node: Node) -> ClampLayer:
    """Relu / Clip -> ATen's quantized relu / clamp on the codes (qparams kept)."""
    x = ctx.activation(node)
    enc = ctx.encodings[x]
    if node.op_type == "Relu":
        lo, hi, op = enc.zp, 255, "quantized::relu"
    else:
        lo, hi = _clamp_codes(node.attrs["min"], enc), _clamp_codes(node.attrs["max"], enc)
        op = "quantized::clamp"
    return ctx.layer(ClampLayer, node, op=op, inputs=(x,), lo=lo, hi=hi)
