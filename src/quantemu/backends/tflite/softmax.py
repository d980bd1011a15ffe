"""TFLite's int8 -> int8 SOFTMAX, as LiteRT's reference resolver and TFLite-Micro run it.

TFLite normalises over the last axis of its NHWC tensor; quantemu's IR is NCHW, so a 4-D
activation's TFLite axis is ``axis=1`` here (and ``-1`` for 2-D): the caller says which.

LiteRT's reference resolver (``OpResolverType.BUILTIN_REF``) and TFLite-Micro both run
``reference_ops::Softmax`` in gemmlowp fixed point (:class:`SoftmaxFixedPointParams`); LiteRT's
default resolver runs ``optimized_ops::Softmax``, float32 from a table of ``expf`` values
(:class:`SoftmaxFloatTableParams`). The parameters pick the path; the two differ on about 1 output
in 10**5 (see the README).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.activation import int8_operand
from quantemu.backends.tflite.activation_params import (
    SoftmaxFixedPointParams,
    SoftmaxFloatTableParams,
)
from quantemu.errors import InvalidInputError
from quantemu.intmath import (
    exp_on_negative_values,
    reciprocal_with_headroom,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul_round_half_up,
    wrap,
)

__all__ = ["softmax_int8"]

INT8_MIN, INT8_MAX = -128, 127
F32 = np.float32
SCALED_DIFF_INTEGER_BITS = 5  # Q5.26 input differences
ACCUMULATION_INTEGER_BITS = 12  # Q12.19 sum of exponentials


def _rows(x, axis: int, func: str) -> tuple[np.ndarray, int]:
    v = int8_operand(x, func)
    if v.ndim == 0 or not -v.ndim <= axis < v.ndim:
        raise InvalidInputError(f"{func}: axis {axis} out of range for a {v.ndim}-D input")
    return np.moveaxis(v, axis, -1), axis


def _float_table(v: np.ndarray, p: SoftmaxFloatTableParams):
    d = v.max(axis=-1, keepdims=True) - v  # in [0, 255]
    e = np.asarray(p.exp_table, dtype=F32)[d]
    # np.add.accumulate is strictly sequential, like the C loop (np.sum would pair terms up)
    total = np.add.accumulate(e, axis=-1, dtype=F32)[..., -1:]
    inv = F32(1.0) / (total * F32(p.output_scale))
    prob = (e * inv).astype(np.float64)  # float32 products, widened exactly
    rounded = np.trunc(prob + np.where(prob >= 0, 0.5, -0.5)).astype(np.int64)  # std::round
    out = rounded + p.output_zero_point
    saturated = int(np.count_nonzero((out < INT8_MIN) | (out > INT8_MAX)))
    y = np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)
    counters = {"output_saturated": saturated, "flushed_to_zero": 0, "sum_wrapped": 0}
    return y, counters | {"shift_over_31": 0}


def _fixed_point(v: np.ndarray, p: SoftmaxFixedPointParams):
    diff = v - v.max(axis=-1, keepdims=True)  # in [-255, 0]
    used = diff >= p.diff_min
    # |diff| <= |diff_min| < 2**31 / 2**shift: the shifted difference fits int32
    shifted = np.where(used, diff, 0) << p.input_left_shift
    scaled = saturating_rounding_doubling_high_mul_round_half_up(shifted, p.input_multiplier)
    exp = np.asarray(exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS), dtype=np.int64)
    terms = np.where(used, rounding_divide_by_pot(exp, ACCUMULATION_INTEGER_BITS), 0)
    exact_sum = terms.sum(axis=-1, keepdims=True)  # <= depth * 2**19: exact in int64
    total = wrap(exact_sum, 32)  # the C adds int32 raw values: they wrap past 4096 terms
    recip, bits_over_unit = reciprocal_with_headroom(total, ACCUMULATION_INTEGER_BITS)
    prod = saturating_rounding_doubling_high_mul_round_half_up(
        np.broadcast_to(recip, exp.shape), exp
    )
    unsat = rounding_divide_by_pot(prod, np.broadcast_to(bits_over_unit + 31 - 8, exp.shape))
    out = np.asarray(unsat, dtype=np.int64) + INT8_MIN
    saturated = int(np.count_nonzero(used & ((out < INT8_MIN) | (out > INT8_MAX))))
    y = np.where(used, np.clip(out, INT8_MIN, INT8_MAX), INT8_MIN).astype(np.int8)
    counters = {
        "output_saturated": saturated,
        "flushed_to_zero": int(np.count_nonzero(~used)),
        "sum_wrapped": int(np.count_nonzero(total != exact_sum)),
        "shift_over_31": int(np.count_nonzero(bits_over_unit + 31 - 8 > 31)),
    }
    return y, counters


def softmax_int8(x, p: SoftmaxFloatTableParams | SoftmaxFixedPointParams, axis: int = -1):
    """int8 SOFTMAX along ``axis``.

    LiteRT's optimized kernel (:class:`SoftmaxFloatTableParams`): ``d = max - x``;
    ``e = table[d]`` (float32); ``S = e_0 + e_1 + ...`` summed in float32 in axis order;
    ``y = round(e * (1 / (S * s_out))) + zp_out`` (``std::round``: ties away from zero), clamped
    to int8.

    Reference kernels (:class:`SoftmaxFixedPointParams`): for ``d = x - max >= diff_min``,
    ``E = exp_on_negative_values(SRDHM(d * 2**shift, m), 5)`` (Q0.31),
    ``S = sum RoundingDivideByPOT(E, 12)`` (Q12.19, int32 adds), ``(r, n) =
    GetReciprocal(S)``; ``y = RoundingDivideByPOT(SRDHM(r, E), n + 23) - 128`` clamped; entries
    with ``d < diff_min`` give -128.

    Counters: ``output_saturated``, ``flushed_to_zero`` (entries below ``diff_min``),
    ``sum_wrapped`` (rows whose int32 sum of exponentials wrapped: more than 4096 terms),
    ``shift_over_31`` (rows whose sum of exponentials is 512 or more, so that the final
    ``RoundingDivideByPOT`` exponent ``n + 23`` exceeds 31: gemmlowp asserts there, and both
    peers abort; the exact quotient computed here is then not a TFLite result).

    >>> from quantemu.backends.tflite.activation_params import softmax_params
    >>> x = np.array([[0, 10, 20, 30]], dtype=np.int8)
    >>> softmax_int8(x, softmax_params(0.1))[0].tolist()  # 256 * [.032, .087, .237, .644] - 128
    [[-120, -106, -67, 37]]
    >>> softmax_int8(x, softmax_params(0.1, litert_optimized=True))[0].tolist()
    [[-120, -106, -67, 37]]
    """
    func = "softmax_int8"
    v, axis = _rows(x, axis, func)
    if v.shape[-1] == 0:
        raise InvalidInputError(f"{func}: the softmax axis has length 0")
    if isinstance(p, SoftmaxFloatTableParams):
        y, counters = _float_table(v, p)
    elif isinstance(p, SoftmaxFixedPointParams):
        y, counters = _fixed_point(v, p)
    else:
        raise InvalidInputError(f"{func}: p must be softmax parameters, got {type(p).__name__}")
    return np.moveaxis(y, -1, axis), counters
