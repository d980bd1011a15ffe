"""Scalar Python-int twins of :mod:`~quantemu.backends.tflite.activation` and
:mod:`~quantemu.backends.tflite.softmax`: TFLite's reference loops transcribed one element (one
softmax row) at a time on Python ints, the specification the vectorized kernels are tested
against with ``==``. The float32 softmax of LiteRT's optimized kernel is transcribed with
sequential float32 scalar operations. Nothing here is vectorized.
"""

from __future__ import annotations

import math

import numpy as np

from quantemu.backends.tflite.activation_params import (
    GemmlowpActivationParams,
    HardSwishParams,
    LeakyReluParams,
    LutParams,
    ReluParams,
    SoftmaxFixedPointParams,
    SoftmaxFloatTableParams,
)
from quantemu.backends.tflite.gelu import gelu_transform
from quantemu.intmath import reference as ref

__all__ = ["gelu", "hard_swish", "leaky_relu", "logistic", "relu", "softmax_row", "tanh"]

INT8_MIN, INT8_MAX = -128, 127


def _clamp(v: int, lo: int = INT8_MIN, hi: int = INT8_MAX) -> int:
    return min(max(v, lo), hi)


def relu(x: int, p: ReluParams) -> int:
    """``ReluX`` on one code (or TFLite-Micro's RELU6 clamp)."""
    if not p.requantize:
        return _clamp(x, p.act_min, p.act_max)
    r = ref.multiply_by_quantized_multiplier_double_rounding(
        x - p.input_zero_point, p.multiplier, p.shift
    )
    return _clamp(p.output_zero_point + r, p.act_min, p.act_max)


def leaky_relu(x: int, p: LeakyReluParams) -> int:
    """``QuantizeLeakyRelu`` on one code."""
    d = x - p.input_zero_point
    if d >= 0:
        r = ref.multiply_by_quantized_multiplier_double_rounding(
            d, p.multiplier_identity, p.shift_identity
        )
    else:
        r = ref.multiply_by_quantized_multiplier_double_rounding(
            d, p.multiplier_alpha, p.shift_alpha
        )
    return _clamp(p.output_zero_point + r)


def hard_swish(x: int, p: HardSwishParams) -> int:
    """``reference_ops::HardSwish`` on one code, int16 step by step."""
    srdhm16 = ref.saturating_rounding_doubling_high_mul_round_half_up_int16
    hires = (x - p.input_zero_point) * 128
    preshift = srdhm16(hires, p.output_multiplier_fixedpoint_int16)
    reluish = hires
    e = p.reluish_multiplier_exponent
    if e > 0:
        reluish = ref.shift_left_saturate(reluish, e - 1, 16)
    reluish = srdhm16(reluish, p.reluish_multiplier_fixedpoint_int16)
    if e > 0:
        reluish = ref.shift_left_saturate(reluish, 1, 16)
    if e < 0:
        reluish = ref.rounding_divide_by_pot(reluish, -e)
    reluish = (reluish + (1 << 15)) >> 1
    pre = ref.saturating_doubling_high_mul_toward_zero_int16(reluish, preshift)
    out = ref.rounding_divide_by_pot(pre, -p.output_multiplier_exponent)
    out = ref.wrap(out + p.output_zero_point, 16)  # int16_t += : wraps
    return _clamp(out)


def _gemmlowp_q4(x: int, p: GemmlowpActivationParams, fn, shift: int, offset: int) -> int:
    d = x - p.input_zero_point
    if d <= -p.input_range_radius:
        return INT8_MIN
    if d >= p.input_range_radius:
        return INT8_MAX
    q4 = ref.multiply_by_quantized_multiplier_double_rounding(
        d, p.input_multiplier, p.input_left_shift
    )
    return _clamp(ref.rounding_divide_by_pot(fn(q4, 4), shift) + offset)


def logistic(x: int, p: LutParams | GemmlowpActivationParams) -> int:
    """LOGISTIC on one code: table lookup (LiteRT) or ``reference_integer_ops::Logistic``."""
    if isinstance(p, LutParams):
        return p.table[x + 128]
    return _gemmlowp_q4(x, p, ref.logistic, 23, INT8_MIN)


def tanh(x: int, p: LutParams | GemmlowpActivationParams) -> int:
    """TANH on one code: table lookup (LiteRT) or ``reference_integer_ops::Tanh``."""
    if isinstance(p, LutParams):
        return p.table[x + 128]
    return _gemmlowp_q4(x, p, ref.tanh, 24, 0)


def gelu(x: int, s_in, z_in: int, s_out, z_out: int, *, approximate: str = "none") -> int:
    """GELU on one code from the quantization, without a table: LiteRT's ``LUTPopulate`` step
    for the entry of ``x`` (float32 dequantize, transform, scale, ``std::round``, float add)."""
    f32 = np.float32
    t = gelu_transform(approximate)(f32(s_in) * f32(x - z_in))
    r = float(t * (f32(1.0) / f32(s_out)))
    rounded = f32(math.copysign(math.floor(abs(r) + 0.5), r))  # exact: r is a float32
    return _clamp(int(f32(rounded + f32(z_out))))


def _softmax_fixed(row: list[int], p: SoftmaxFixedPointParams) -> list[int]:
    mul = ref.saturating_rounding_doubling_high_mul_round_half_up
    top = max(row)
    exps = []
    total = 0
    for x in row:
        d = x - top
        if d >= p.diff_min:
            e = ref.exp_on_negative_values(mul(d * 2**p.input_left_shift, p.input_multiplier), 5)
            total = ref.wrap(total + ref.rounding_divide_by_pot(e, 12), 32)  # C int32 add
            exps.append(e)
        else:
            exps.append(None)
    recip, bits_over_unit = ref.reciprocal_with_headroom(total, 12)
    out = []
    for e in exps:
        if e is None:
            out.append(INT8_MIN)
        else:
            unsat = ref.rounding_divide_by_pot(mul(recip, e), bits_over_unit + 31 - 8)
            out.append(_clamp(unsat + INT8_MIN))
    return out


def _softmax_float(row: list[int], p: SoftmaxFloatTableParams) -> list[int]:
    f32 = np.float32
    top = max(row)
    total = f32(0.0)
    for x in row:
        total = f32(total + f32(p.exp_table[top - x]))
    inv = f32(1.0) / f32(total * f32(p.output_scale))
    out = []
    for x in row:
        prob = float(f32(f32(p.exp_table[top - x]) * inv))
        rounded = math.trunc(prob + 0.5 if prob >= 0 else prob - 0.5)  # std::round
        out.append(_clamp(rounded + p.output_zero_point))
    return out


def softmax_row(row, p: SoftmaxFixedPointParams | SoftmaxFloatTableParams) -> list[int]:
    """SOFTMAX of one row (the softmax axis), in the order TFLite's loops visit it."""
    row = [int(v) for v in row]
    if isinstance(p, SoftmaxFixedPointParams):
        return _softmax_fixed(row, p)
    return _softmax_float(row, p)
