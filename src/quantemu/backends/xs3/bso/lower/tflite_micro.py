"""Operators XMOS's runtime leaves to TFLite-Micro's int8 reference kernels: ADD/SUB, and
AVERAGE_POOL_2D where tflite2xcore does not substitute lib_nn's ``avgpool2d``.

tflite2xcore keeps ADD as the builtin operator, so an xcore.ai deployment runs TFLite-Micro's
``reference_integer_ops::Add`` (the gemmlowp fixed-point arithmetic, transcribed here with
:mod:`quantemu.intmath`'s gemmlowp primitives). Parameters as TFLite-Micro's ``Prepare``:
``left_shift = 20``, ``twice_max = 2 * max(s1, s2)``, input multipliers ``s_i / twice_max`` and
output multiplier ``twice_max / (2^20 * s_out)`` through ``QuantizeMultiplierSmallerThanOneExp``
(double arithmetic from the float32 scales). Per element::

    a_i = MBQM((x_i - z_i) * 2^20, m_i, e_i)          # MultiplyByQuantizedMultiplier...Exp
    y   = clamp(MBQM(a_1 +- a_2, m_out, e_out) + z_out, act_min, act_max)

The average pool is TFLite's ``reference_integer_ops::AveragePool``: the sum of the codes of the
window positions inside the image, divided by their count with rounding half away from zero
(``(acc +- count/2) / count``, C's truncating division); input and output share their
quantization. ``count_include_pad`` is modelled as the explicit PAD (with the zero point) a
converter inserts before a VALID pool.

These kernels are not lib_nn operators and no conformance vector covers them: the layers say so
with ``exact=False``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from quantemu.backends.tflite.params import (
    quantize_multiplier_smaller_than_one_exp as quantize_multiplier_smaller_than_one,
)
from quantemu.backends.tflite.quantize import (
    ActivationRange,
    activation_range,
)
from quantemu.backends.xs3.bso.lower.pool import PoolGeometry
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.intmath import (
    rounding_divide_by_pot,
    saturate_count,
    saturating_rounding_doubling_high_mul_round_half_up,
)
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

TFLM_NOTE = (
    "TFLite-Micro reference kernel {op}, not a lib_nn operator; not covered by conformance vectors"
)
ADD_LEFT_SHIFT = 20


def mbqm_smaller_than_one(x: np.ndarray, q: int, left_shift: int) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp(x, q, left_shift)`` (left_shift <= 0):
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, q), -left_shift)``."""
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul_round_half_up(x, q), -left_shift
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class AddLayer(Layer):
    """TFLite-Micro's int8 ADD (or SUB): see the module docstring."""

    zero_points: tuple[int, int]
    multipliers: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]  # in1, in2, out
    subtract: bool
    act: ActivationRange
    encoding: LinearEncoding
    constants: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Vectorized gemmlowp arithmetic; every intermediate stays in int32 as in the C."""
        fed = iter(inputs)
        codes = [c if c is not None else next(fed).codes for c in self.constants]
        scaled = []
        for c, z, (q, e) in zip(codes, self.zero_points, self.multipliers[:2], strict=True):
            shifted = (c.astype(np.int64) - z) * (1 << ADD_LEFT_SHIFT)  # |.| <= 255 * 2^20
            scaled.append(mbqm_smaller_than_one(shifted, q, e))
        raw = scaled[0] - scaled[1] if self.subtract else scaled[0] + scaled[1]  # < 2^29
        q_out, e_out = self.multipliers[2]
        out = mbqm_smaller_than_one(raw, q_out, e_out) + int(self.encoding.zero_point)
        y = self.act.clamp(np.clip(out, -128, 127))  # TFLite clamps to the activation range
        # As in LibnnLayer (conv.py): a clamp the fused activation makes anyway loses nothing.
        moved = self.act.moved(out)
        counters = {
            "output_saturated": int(np.count_nonzero(((out < -128) | (out > 127)) & ~moved)),
            "activation_clamped": int(np.count_nonzero(moved)),
        }
        return LayerOutput(QTensor(y, self.encoding), counters, {"acc": raw})


def lower_add(ctx: Xs3Context, node: Node) -> Layer:
    """Add / Sub as TFLite-Micro's reference kernel (module docstring), fused ReLU applied."""
    (c1, e1), (c2, e2) = (ctx.operand(n) for n in node.inputs[:2])
    if c1 is not None and c2 is not None:
        raise UnsupportedError(f"{node}: both operands are constant; fold them first")
    enc_out = ctx.encoding(node.outputs[0])
    s1, s2, s_out = (float(np.float32(e.scale)) for e in (e1, e2, enc_out))
    twice_max = 2 * max(s1, s2)
    where = str(node)
    multipliers = (
        quantize_multiplier_smaller_than_one(s1 / twice_max, where),
        quantize_multiplier_smaller_than_one(s2 / twice_max, where),
        quantize_multiplier_smaller_than_one(twice_max / ((1 << ADD_LEFT_SHIFT) * s_out), where),
    )
    act = activation_range(node.attrs, enc_out, where)
    return _tflm_layer(
        ctx,
        node,
        AddLayer,
        "SUB" if node.op_type == "Sub" else "ADD",
        zero_points=(int(e1.zero_point), int(e2.zero_point)),
        multipliers=multipliers,
        subtract=node.op_type == "Sub",
        act=act,
        encoding=enc_out,
        constants=(c1, c2),
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class TfliteAvgPoolLayer(Layer):
    """TFLite's ``reference_integer_ops::AveragePool`` (module docstring)."""

    geometry: PoolGeometry
    include_pad: bool

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Window sums and counts over the kernel taps, then TFLite's rounding division."""
        x, enc = inputs[0].codes, inputs[0].encoding
        top, left, bottom, right = self.geometry.pads
        widths = ((0, 0), (0, 0), (top, bottom), (left, right))
        # Explicit pads read the zero point (and count) when count_include_pad, as a PAD op
        # before a VALID pool would; otherwise they neither add nor count.
        fill = int(enc.zero_point) if self.include_pad else 0
        xp = np.pad(x.astype(np.int64), widths, constant_values=fill)
        mp = np.pad(
            np.ones((1, 1, *x.shape[2:]), np.int64), widths, constant_values=int(self.include_pad)
        )
        valid = replace(self.geometry, pads=(0, 0, 0, 0))
        acc = sum(valid.taps(xp, 0))  # |acc| <= K_h*K_w*128: fits
        count = sum(valid.taps(mp, 0))
        half = count // 2
        num = np.where(acc > 0, acc + half, acc - half)
        y = np.sign(num) * (np.abs(num) // count)  # C's truncating division
        y, n_sat = saturate_count(y, 8)
        return LayerOutput(
            QTensor(y.astype(np.int8), enc), {"output_saturated": int(n_sat)}, {"acc": acc}
        )


def lower_tflite_avgpool(ctx: Xs3Context, node: Node, geometry: PoolGeometry) -> Layer:
    """AveragePool on TFLite-Micro's reference kernel (padding, C % 4 != 0, ceil_mode)."""
    if geometry.dilations != (1, 1):
        raise UnsupportedError(f"{node}: dilated average pooling has no TFLite int8 kernel")
    ctx.same_as_input(node)
    include = bool(node.attrs["count_include_pad"])
    fields = {"geometry": geometry, "include_pad": include}
    return _tflm_layer(
        ctx, node, TfliteAvgPoolLayer, "AVERAGE_POOL_2D", inputs=node.inputs[:1], **fields
    )


def _tflm_layer(ctx: Xs3Context, node: Node, cls: type[Layer], tflite_op: str, **fields) -> Layer:
    """A layer transcribing TFLite-Micro's reference kernel ``tflite_op`` (``exact=False``)."""
    note = TFLM_NOTE.format(op=tflite_op)
    return ctx.layer(cls, node, op=f"tflite:{tflite_op}", exact=False, note=note, **fields)
