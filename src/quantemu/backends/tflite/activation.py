"""TFLite's int8 reference activations: RELU family, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH.

Pure functions: an int8 array (any layout: these are elementwise) and the frozen parameters of
:mod:`~quantemu.backends.tflite.activation_params` -> ``(int8 array, counters)``. Which runtime's
arithmetic runs is decided by the parameters (a :class:`LutParams` table for LiteRT's LOGISTIC
and TANH, :class:`GemmlowpActivationParams` for TFLite-Micro's). Counters:
``output_saturated`` (a value clamped at an int8 rail that no activation bound set),
``activation_clamped`` (clamped at a RELU bound), ``input_clamped`` (TFLite-Micro LOGISTIC /
TANH inputs beyond the range radius, sent to a rail without computing).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.activation_params import (
    GemmlowpActivationParams,
    HardSwishParams,
    LeakyReluParams,
    LutParams,
    ReluParams,
)
from quantemu.errors import InvalidInputError
from quantemu.intmath import (
    logistic,
    multiply_by_quantized_multiplier_double_rounding,
    rounding_divide_by_pot,
    saturating_doubling_high_mul_toward_zero_int16,
    saturating_rounding_doubling_high_mul_round_half_up_int16,
    shift_left_saturate,
    tanh,
    wrap,
)

__all__ = ["hard_swish_int8", "leaky_relu_int8", "logistic_int8", "relu_int8", "tanh_int8"]

INT8_MIN, INT8_MAX = -128, 127


def int8_operand(x, func: str) -> np.ndarray:
    """``x`` as int64 codes; an array that is not integer or leaves int8 is an error."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(
            f"{func}: x must be an integer array of int8 codes, got {arr.dtype}"
        )
    if arr.size and (arr.min() < INT8_MIN or arr.max() > INT8_MAX):
        raise InvalidInputError(
            f"{func}: x has codes in [{arr.min()}, {arr.max()}] outside int8 [-128, 127]"
        )
    return arr.astype(np.int64)


def _saturate(v: np.ndarray, act_min: int = INT8_MIN, act_max: int = INT8_MAX):
    low, high = v < act_min, v > act_max
    n_low, n_high = int(np.count_nonzero(low)), int(np.count_nonzero(high))
    by_act = (n_low if act_min > INT8_MIN else 0) + (n_high if act_max < INT8_MAX else 0)
    counters = {"output_saturated": n_low + n_high - by_act, "activation_clamped": by_act}
    return np.clip(v, act_min, act_max).astype(np.int8), counters


def relu_int8(x, p: ReluParams):
    """Standalone RELU / RELU6 / RELU_N1_TO_1 (``ReluX``).

    Formula: ``clamp(zp_out + MBQM(x - zp_in, m, s), act_min, act_max)`` with TFLite's
    double-rounding ``MultiplyByQuantizedMultiplier``; ``clamp(x, act_min, act_max)`` when
    ``p.requantize`` is False (TFLite-Micro's RELU6).

    >>> from quantemu.backends.tflite.activation_params import relu_params
    >>> p = relu_params("RELU", 0.05, -1, 0.025, -100)  # x2 around zero points -1 -> -100
    >>> y, c = relu_int8(np.array([-128, -2, -1, 0, 1, 63, 64, 127]), p)
    >>> y.tolist(), c
    ([-100, -100, -100, -98, -96, 28, 30, 127], {'output_saturated': 1, 'activation_clamped': 2})
    """
    v = int8_operand(x, "relu_int8")
    if p.requantize:
        r = multiply_by_quantized_multiplier_double_rounding(
            v - p.input_zero_point, p.multiplier, p.shift
        )
        v = np.asarray(r, dtype=np.int64) + p.output_zero_point  # |MBQM| < 2**31: int64 exact
    return _saturate(v, p.act_min, p.act_max)


def leaky_relu_int8(x, p: LeakyReluParams):
    """LEAKY_RELU (``QuantizeLeakyRelu``).

    Formula: ``d = x - zp_in``; ``zp_out + MBQM(d, m_identity, s_identity)`` for ``d >= 0``,
    ``zp_out + MBQM(d, m_alpha, s_alpha)`` for ``d < 0``; saturated to int8.

    >>> from quantemu.backends.tflite.activation_params import leaky_relu_params
    >>> y, c = leaky_relu_int8(np.array([-128, -5, 0, 5, 127]), leaky_relu_params(1, 0, 1, 0, 0.2))
    >>> y.tolist(), c["output_saturated"]  # -128 * 0.2 = -25.6; -5 * 0.2 = -1
    ([-26, -1, 0, 5, 127], 0)
    """
    d = int8_operand(x, "leaky_relu_int8") - p.input_zero_point
    pos = d >= 0
    m = np.where(pos, p.multiplier_identity, p.multiplier_alpha)
    s = np.where(pos, p.shift_identity, p.shift_alpha)
    r = multiply_by_quantized_multiplier_double_rounding(d, m, s)
    return _saturate(np.asarray(r, dtype=np.int64) + p.output_zero_point)


def hard_swish_int8(x, p: HardSwishParams):
    """HARD_SWISH (``reference_ops::HardSwish``), 16-bit fixed point.

    Formula: ``h = (x - zp_in) * 2**7``; ``o = SRDHM16(h, m_out)``; the "reluish" factor
    ``r = SRDHM16(sat16(h << (e - 1)), m_rel)`` then ``sat16(r << 1)`` for a reluish exponent
    ``e > 0`` (``RoundingDivideByPOT(SRDHM16(h, m_rel), -e)`` for ``e < 0``), mapped to
    ``[0, 1]`` as ``(r + 2**15) >> 1``; the output is
    ``RoundingDivideByPOT(SDHM16(r, o), -e_out) + zp_out`` (int16 add, wraps), clamped to int8.

    Policy: SRDHM16 rounds half up, SDHM16 truncates toward zero, right shifts round half away.

    >>> from quantemu.backends.tflite.activation_params import hard_swish_params
    >>> p = hard_swish_params(0.0313725508749485, -1, 0.01715686358511448, -106)
    >>> hard_swish_int8(np.array([-128, -97, -1, 0, 95, 127]), p)[0].tolist()  # 95: 3.01 -> 3.017
    [-106, -106, -106, -105, 70, 127]
    """
    h = (int8_operand(x, "hard_swish_int8") - p.input_zero_point) * 128  # |.| <= 32640
    o = saturating_rounding_doubling_high_mul_round_half_up_int16(
        h, p.output_multiplier_fixedpoint_int16
    )
    e = p.reluish_multiplier_exponent
    r = shift_left_saturate(h, e - 1, 16) if e > 0 else h
    r = saturating_rounding_doubling_high_mul_round_half_up_int16(
        r, p.reluish_multiplier_fixedpoint_int16
    )
    if e > 0:
        r = shift_left_saturate(r, 1, 16)
    elif e < 0:
        r = rounding_divide_by_pot(r, -e)
    r = (np.asarray(r, dtype=np.int64) + (1 << 15)) >> 1  # [-1, 1] -> [0, 1]: in [0, 2**15)
    pre = saturating_doubling_high_mul_toward_zero_int16(r, o)
    out = rounding_divide_by_pot(pre, -p.output_multiplier_exponent)
    return _saturate(wrap(np.asarray(out, dtype=np.int64) + p.output_zero_point, 16))


def _lookup(x, p: LutParams, func: str):
    idx = int8_operand(x, func) + 128
    y = np.asarray(p.table, dtype=np.int8)[idx]
    clamped = int(np.count_nonzero(np.asarray(p.clamped, dtype=bool)[idx]))
    return y, {"output_saturated": clamped, "activation_clamped": 0}


def _gemmlowp_q4(x, p: GemmlowpActivationParams, func: str, fn, *, shift: int, offset: int):
    """TFLite-Micro's int8 LOGISTIC/TANH around gemmlowp's ``fn`` (Q4.27 in, Q0.31 out)."""
    d = int8_operand(x, func) - p.input_zero_point
    low, high = d <= -p.input_range_radius, d >= p.input_range_radius
    inside = np.where(low | high, 0, d)  # |inside| < radius: inside * 2**shift fits int32
    q4 = multiply_by_quantized_multiplier_double_rounding(
        inside, p.input_multiplier, p.input_left_shift
    )
    out = np.asarray(rounding_divide_by_pot(fn(q4, 4), shift), dtype=np.int64) + offset
    y, counters = _saturate(out)
    y = np.where(low, INT8_MIN, np.where(high, INT8_MAX, y)).astype(np.int8)
    inner = ~(low | high)
    counters["output_saturated"] = int(np.count_nonzero(inner & ((out < -128) | (out > 127))))
    counters["input_clamped"] = int(np.count_nonzero(low | high))
    return y, counters


def logistic_int8(x, p: LutParams | GemmlowpActivationParams):
    """LOGISTIC: LiteRT's table lookup, or TFLite-Micro's gemmlowp path.

    TFLite-Micro formula: ``d = x - zp_in``; ``-128`` for ``d <= -radius``, ``127`` for
    ``d >= radius``; else ``RoundingDivideByPOT(logistic(MBQM(d, m, s)), 23) - 128`` clamped
    (Q0.31 -> codes of scale 1/256, zero point -128).

    >>> from quantemu.backends.tflite.activation_params import logistic_params
    >>> x = np.array([-128, -1, 0, 127])
    >>> logistic_int8(x, logistic_params(0.03137255, -1))[0].tolist()  # sigmoid(-3.98) * 256
    [-123, 0, 2, 123]
    >>> logistic_int8(x, logistic_params(0.03137255, -1, runtime="tflite_micro"))[0].tolist()
    [-123, 0, 2, 123]
    """
    if isinstance(p, LutParams):
        return _lookup(x, p, "logistic_int8")
    return _gemmlowp_q4(x, p, "logistic_int8", logistic, shift=31 - 8, offset=INT8_MIN)


def tanh_int8(x, p: LutParams | GemmlowpActivationParams):
    """TANH: LiteRT's table lookup, or TFLite-Micro's gemmlowp path.

    TFLite-Micro formula: as :func:`logistic_int8` with ``tanh`` and
    ``RoundingDivideByPOT(., 24)`` (Q0.31 -> codes of scale 1/128, zero point 0), whatever the
    output tensor's quantization says.

    >>> from quantemu.backends.tflite.activation_params import tanh_params
    >>> x = np.array([-128, -1, 0, 127])
    >>> tanh_int8(x, tanh_params(0.03137255, -1))[0].tolist()
    [-128, 0, 4, 127]
    """
    if isinstance(p, LutParams):
        return _lookup(x, p, "tanh_int8")
    return _gemmlowp_q4(x, p, "tanh_int8", tanh, shift=31 - 7, offset=0)
