"""SQUARED_DIFFERENCE, RSQRT, MINIMUM and MAXIMUM on int8 codes (LiteRT BUILTIN_REF and
TFLite-Micro run the same arithmetic for all four; ``elementwise_peer_vectors.json`` holds both).

- SQUARED_DIFFERENCE (``squared_difference.cc``): ADD's input rescaling with ``left_shift = 7``,
  the difference squared in int32, one requantization.
- RSQRT (``elementwise.cc``): per code, gemmlowp's Newton-Raphson
  ``GetInvSqrtQuantizedMultiplierExp`` on ``q - z_in``, then two
  ``MultiplyByQuantizedMultiplier``; a code below the input's zero point (a negative input) is
  refused by both peers ("Rsqrt is only defined for positive values"). There are only 256
  codes, so Prepare here tabulates the kernel (:class:`RsqrtParams`).
- MINIMUM / MAXIMUM (``maximum_minimum.cc``): ``min`` / ``max`` of the raw codes; the converter
  gives both inputs and the output one quantization (a constant operand takes the input's).

Each primitive has a Python-int twin (``*_reference``) the vectorized kernel is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.activation import int8_operand
from quantemu.backends.tflite.elementwise_params import (
    SQDIFF_LEFT_SHIFT,
    SquaredDifferenceParams,
    squared_difference_params,
)
from quantemu.backends.tflite.multiplier import quantize_multiplier
from quantemu.backends.tflite.output import requantize_clamp
from quantemu.backends.tflite.params import _f32, _zero_point
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding as mbqm
from quantemu.intmath import reference as ref
from quantemu.intmath import rounding_divide_by_pot as rdbpot
from quantemu.intmath import saturating_rounding_doubling_high_mul_round_half_up as srdhm

__all__ = [
    "RsqrtParams",
    "SquaredDifferenceParams",
    "maximum_int8",
    "maximum_reference",
    "minimum_int8",
    "minimum_reference",
    "rsqrt_int8",
    "rsqrt_params",
    "rsqrt_reference",
    "squared_difference_int8",
    "squared_difference_params",
    "squared_difference_reference",
]

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
RSQRT_SHIFT = 20  # elementwise.cc's kShift
_HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
_HALF_SQRT2 = 1518500250  # sqrt(2) / 2 in Q0.31


def _binary_operands(x1, x2, where: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = int8_operand(x1, where), int8_operand(x2, where)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidInputError(
            f"{where}: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None
    return a, b


# --------------------------------------------------------------------- SQUARED_DIFFERENCE


def squared_difference_int8(x1, x2, p: SquaredDifferenceParams):
    """int8 SQUARED_DIFFERENCE with NumPy broadcasting: ``(y, counters)``.

    Formula: ``a_i = MBQM((x_i + input_i_offset) * 2**7, m_i, s_i)``, ``d = a_1 - a_2``,
    ``y = clamp(MBQM(d * d, m_out, s_out) + output_offset, -128, 127)``.

    Policy: every MBQM rounds twice (ties up, then away from zero); ``|a_i| <= 255 * 2**6`` so
    ``d * d < 2**30``: no int32 overflow. ``output_saturated`` counts clamped outputs.

    Mirrors: ``SquaredDifference(T, T, const ArithmeticParams&)`` of TFLite-Micro's
    ``squared_difference.cc`` and LiteRT's, with ``ElementWise`` /
    ``BroadcastBinaryFunction4DSlow``.

    >>> p = squared_difference_params(0.5, 0, 0.5, 0, 0.25, -128)  # .elementwise_params
    >>> squared_difference_int8(np.array([4, -2, 0]), np.array([2, 2, 0]), p)[0].tolist()
    [-124, -112, -128]
    """
    a, b = _binary_operands(x1, x2, "squared_difference_int8")
    shift = 1 << SQDIFF_LEFT_SHIFT
    a1 = mbqm((a + p.input1_offset) * shift, p.input1_multiplier, p.input1_shift)
    a2 = mbqm((b + p.input2_offset) * shift, p.input2_multiplier, p.input2_shift)
    d = np.asarray(a1, np.int64) - np.asarray(a2, np.int64)
    y, counters = requantize_clamp(d * d, p.output_multiplier, p.output_shift, p.output_offset)
    return y, {"output_saturated": counters["output_saturated"]}


def squared_difference_reference(a: int, b: int, p: SquaredDifferenceParams) -> int:
    """The Python-int twin of :func:`squared_difference_int8`, one element."""
    shift = 1 << SQDIFF_LEFT_SHIFT
    a1 = ref.multiply_by_quantized_multiplier_double_rounding(
        (a + p.input1_offset) * shift, p.input1_multiplier, p.input1_shift
    )
    a2 = ref.multiply_by_quantized_multiplier_double_rounding(
        (b + p.input2_offset) * shift, p.input2_multiplier, p.input2_shift
    )
    raw = ref.multiply_by_quantized_multiplier_double_rounding(
        (a1 - a2) * (a1 - a2), p.output_multiplier, p.output_shift
    )
    return min(max(raw + p.output_offset, INT8_MIN), INT8_MAX)


# --------------------------------------------------------------------- RSQRT


@dataclass(frozen=True)
class RsqrtParams:
    """RSQRT's Prepare (``multiplier``, ``shift``, zero points) and the kernel tabulated on the
    256 codes (``table[q + 128]``; ``clamped``: the entry was clamped to int8, or is the 127
    that stands for ``1/sqrt(0)``)."""

    multiplier: int
    shift: int
    input_zero_point: int
    output_zero_point: int
    table: tuple[int, ...]
    clamped: tuple[bool, ...]


def _sat_shl(x: np.ndarray, e: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` for ``e > 0`` on int32 values."""
    thr = (1 << (31 - e)) - 1
    return np.where(x > thr, INT32_MAX, np.where(x < -thr, INT32_MIN, x << e))


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def _inv_sqrt(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``GetInvSqrtQuantizedMultiplierExp(v, kReverseShift=-1)`` for ``1 <= v < 2**29``:
    ``(multiplier, left shift)`` arrays."""
    v = np.maximum(v, 2)  # v <= 1 is handled by the caller's np.where
    clz = 32 - np.frexp(v.astype(np.float64))[1].astype(np.int64)  # exact: v < 2**53
    pairs = (clz - 1) // 2 - 1
    shift = 11 - pairs
    x_in = v << (2 * pairs)
    half_input = np.asarray(rdbpot(x_in >> 1, 1), np.int64)
    x = np.full_like(v, 1 << 28)
    for _ in range(5):
        x3 = _sat_shl(np.asarray(srdhm(srdhm(x, x), x), np.int64), 6)
        t = np.asarray(srdhm(_HALF_THREE, x), np.int64) - np.asarray(srdhm(half_input, x3))
        x = _sat_shl(_wrap32(t), 3)
    x = np.asarray(srdhm(x, _HALF_SQRT2), np.int64)
    x = np.where(shift < 0, _wrap32(x << np.maximum(-shift, 0)), x)
    return x, -np.maximum(shift, 0)


def _inv_sqrt_reference(v: int) -> tuple[int, int]:
    """The Python-int twin of :func:`_inv_sqrt` (one value), gemmlowp transcribed."""
    if v <= 1:
        return INT32_MAX, 0
    shift = 11
    while v >= 1 << 29:
        v //= 4
        shift += 1
    pairs = (32 - v.bit_length() - 1) // 2 - 1
    shift -= pairs
    v <<= 2 * pairs
    half_input = ref.rounding_divide_by_pot(v >> 1, 1)
    mul = ref.saturating_rounding_doubling_high_mul_round_half_up

    def sat_shl(x: int, e: int) -> int:
        thr = (1 << (31 - e)) - 1
        return INT32_MAX if x > thr else INT32_MIN if x < -thr else x << e

    x = 1 << 28
    for _ in range(5):
        x3 = sat_shl(mul(mul(x, x), x), 6)
        t = mul(_HALF_THREE, x) - mul(half_input, x3)
        x = sat_shl(ref.wrap(t, 32), 3)
    x = mul(x, _HALF_SQRT2)
    if shift < 0:
        x, shift = ref.wrap(x << -shift, 32), 0
    return x, -shift


def _rsqrt_table(codes: np.ndarray, q: int, s: int, zi: int, zo: int) -> np.ndarray:
    v = codes - zi
    inv, inv_shift = _inv_sqrt(np.maximum(v, 1))
    inv = np.where(v <= 1, INT32_MAX, inv)
    inv_shift = np.where(v <= 1, 0, inv_shift)
    data = np.asarray(mbqm(np.ones_like(v), inv, inv_shift + RSQRT_SHIFT), np.int64)
    out = np.asarray(mbqm(data, q, s - RSQRT_SHIFT), np.int64) + zo
    return np.where(v == 0, INT8_MAX, out)


def rsqrt_params(s_in, z_in, s_out, z_out) -> RsqrtParams:
    """RSQRT's Prepare: ``QuantizeMultiplier(1 / (double)(sqrtf(s_in) * s_out))`` (the product in
    float32, as ``SetRsqrtOutputMultiplier``), then the kernel on every code ``>= z_in``
    (codes below are refused at Eval; their entries are 0).

    >>> p = rsqrt_params(1.0, -128, 1 / 64, -128)
    >>> [p.table[c + 128] for c in (-128, -127, -124, -112)]  # 1/sqrt(0, 1, 4, 16)
    [127, -64, -96, -112]
    """
    where = "rsqrt_params"
    si, so = _f32(s_in, "s_in", where), _f32(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    real = 1.0 / float(np.sqrt(np.float32(si)) * np.float32(so))
    q, s = quantize_multiplier(real)
    codes = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int64)
    try:
        out = _rsqrt_table(codes[codes >= zi], q, s, zi, zo)
    except InvalidInputError:
        raise UnsupportedError(
            f"{where}: s_in={si}, s_out={so} give a multiplier {real!r} whose int32 arithmetic "
            "overflows in the peers (undefined behaviour): use a larger output scale"
        ) from None
    full = np.zeros(256, np.int64)
    full[zi + 128 :] = out
    sat = (full < INT8_MIN) | (full > INT8_MAX) | (codes == zi)
    table = np.clip(full, INT8_MIN, INT8_MAX)
    return RsqrtParams(q, s, zi, zo, tuple(table.tolist()), tuple(sat.tolist()))


def rsqrt_int8(x, p: RsqrtParams):
    """int8 RSQRT: ``(y, counters)``; a code below ``p.input_zero_point`` is an error.

    Formula: ``v = x - z_in``; ``v == 0``: 127; else ``(m_v, s_v) =
    GetInvSqrtQuantizedMultiplierExp(v)``, ``d = MBQM(1, m_v, s_v + 20)``, ``y = clamp(MBQM(d,
    m, s - 20) + z_out, -128, 127)``: ``1/sqrt(v)`` to about 2**-20, times ``1/(sqrt(s_in) *
    s_out)``.

    Policy: gemmlowp fixed point (Q3.28 Newton-Raphson, 5 steps from 1; ties up in the high
    multiplies, away from zero in the divides); tabulated per code at Prepare (exact: the
    kernel depends on the code only). ``output_saturated`` counts clamped codes and ``v == 0``.

    Mirrors: ``RsqrtEvalQuantized`` of TFLite-Micro's ``elementwise.cc`` (LiteRT's int8 RSQRT
    is the same), with ``GetInvSqrtQuantizedMultiplierExp`` of ``kernels/internal/common.h``.

    >>> p = rsqrt_params(0.25, -128, 0.01, -128)
    >>> rsqrt_int8(np.array([-127, -124, 127]), p)[0].tolist()  # 1/sqrt(.25, 1, 63.75)
    [72, -28, -115]
    """
    if not isinstance(p, RsqrtParams):
        raise InvalidInputError(f"rsqrt_int8: p must be RsqrtParams, got {type(p).__name__}")
    codes = int8_operand(x, "rsqrt_int8")
    if codes.size and codes.min() < p.input_zero_point:
        raise InvalidInputError(
            f"rsqrt_int8: code {codes.min()} is below the input zero point "
            f"{p.input_zero_point} (a negative input): LiteRT and TFLite-Micro refuse it "
            "('Rsqrt is only defined for positive values')"
        )
    idx = codes + 128
    y = np.asarray(p.table, np.int8)[idx]
    return y, {"output_saturated": int(np.count_nonzero(np.asarray(p.clamped, bool)[idx]))}


def rsqrt_reference(x: int, p: RsqrtParams) -> int:
    """The Python-int twin of :func:`rsqrt_int8`, one code (from ``p``'s multiplier only)."""
    if x < p.input_zero_point:
        raise InvalidInputError(f"rsqrt_reference: code {x} below {p.input_zero_point}")
    v = x - p.input_zero_point
    if v == 0:
        return INT8_MAX
    inv, inv_shift = _inv_sqrt_reference(v)
    mbqm1 = ref.multiply_by_quantized_multiplier_double_rounding
    data = mbqm1(1, inv, inv_shift + RSQRT_SHIFT)
    out = mbqm1(data, p.multiplier, p.shift - RSQRT_SHIFT) + p.output_zero_point
    return min(max(out, INT8_MIN), INT8_MAX)


# --------------------------------------------------------------------- MINIMUM / MAXIMUM


def minimum_int8(x1, x2):
    """int8 MINIMUM with NumPy broadcasting: ``(y, {})``.

    Formula: ``y = min(x1, x2)`` on the codes (no requantization).

    Policy: exact; the codes are compared as given, so both inputs and the output must share
    one quantization (TFLite's converter arranges it; the kernel does not check).

    Mirrors: ``reference_ops::MaximumMinimumBroadcastSlow`` with ``MinimumOp`` (LiteRT,
    TFLite-Micro ``maximum_minimum.cc``).

    >>> minimum_int8(np.array([[-5, 3]]), np.array([0]))[0].tolist()
    [[-5, 0]]
    """
    a, b = _binary_operands(x1, x2, "minimum_int8")
    return np.minimum(a, b).astype(np.int8), {}


def maximum_int8(x1, x2):
    """int8 MAXIMUM with NumPy broadcasting: ``(y, {})``.

    Formula: ``y = max(x1, x2)`` on the codes (no requantization).

    Policy: exact; one quantization for inputs and output, as :func:`minimum_int8`.

    Mirrors: ``reference_ops::MaximumMinimumBroadcastSlow`` with ``MaximumOp``.

    >>> maximum_int8(np.array([[-5, 3]]), np.array([0]))[0].tolist()
    [[0, 3]]
    """
    a, b = _binary_operands(x1, x2, "maximum_int8")
    return np.maximum(a, b).astype(np.int8), {}


def minimum_reference(a: int, b: int) -> int:
    """The Python-int twin of :func:`minimum_int8`, one element."""
    return a if a < b else b


def maximum_reference(a: int, b: int) -> int:
    """The Python-int twin of :func:`maximum_int8`, one element."""
    return a if a > b else b
