"""RSQRT on int8 codes (``elementwise.cc``; LiteRT BUILTIN_REF and TFLite-Micro run the same
kernel, ``elementwise_peer_vectors.json`` holds both).

Per code, gemmlowp's Newton-Raphson ``GetInvSqrtQuantizedMultiplierExp`` on ``q - z_in``, then
two ``MultiplyByQuantizedMultiplier``; a code below the input's zero point (a negative input) is
refused by both peers ("Rsqrt is only defined for positive values"). There are only 256 codes,
so Prepare here tabulates the kernel (:class:`RsqrtParams`). :func:`rsqrt_reference` is the
Python-int twin the table is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.activation import int8_operand
from quantemu.backends.tflite.multiplier import quantize_multiplier
from quantemu.backends.tflite.params import _f32, _zero_point
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding as mbqm
from quantemu.intmath import reference as ref
from quantemu.intmath import rounding_divide_by_pot as rdbpot
from quantemu.intmath import saturating_rounding_doubling_high_mul_round_half_up as srdhm

__all__ = ["RsqrtParams", "rsqrt_int8", "rsqrt_params", "rsqrt_reference"]

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
RSQRT_SHIFT = 20  # elementwise.cc's kShift
_HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
_HALF_SQRT2 = 1518500250  # sqrt(2) / 2 in Q0.31


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
