"""The two quantizers of lib_nn's int8 output transform, as xcore-opt 1.4.2 runs them.

``OutputTransformFnInt8_Group::Quantizer`` (one accumulator exponent ``A`` and one multiplier
exponent ``M`` for the whole layer) and ``OutputTransformFnInt8_Channelwise::Quantizer`` (an
``A_c``/``M_c`` per channel sharing ``B = A_c + M_c - 14``), plus the bit-width helpers they use
(``count_bits``, ``shl``, ``float_to_int``). Each search step is vectorised over channels; the
C's sequential channel loop, which lets the first failing channel decide what to lower, is kept.
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import UnsupportedError
from quantemu.intmath import wrap

VLMUL_SHR = 14  #: XS3A's VLMUL shift (``VLMUL_SHR_XS3A``); VX4A would be 15.
_MAX_STEPS = 4096  # far more exponent steps than any solvable layer needs


def frexp_exponent(v) -> np.ndarray:
    """C ``frexp``'s exponent: ``e`` with ``|v| = f * 2**e``, ``f in [0.5, 1)``; 0 for 0.

    >>> frexp_exponent(np.array([0.0, 1.0, 0.75, -5.0, 32767.0])).tolist()
    [0, 1, 0, 3, 15]
    """
    return np.frexp(np.asarray(v, dtype=np.float64))[1].astype(np.int64)


def count_bits(v) -> np.ndarray:
    """Two's-complement width of int64 ``v`` (sign bit included): ``64 - clrsb(v)``.

    Exact for ``|v| < 2**53`` (the solver's values are below ``2**48``).

    >>> count_bits(np.array([0, -1, 1, 32767, -32768, 32768])).tolist()
    [1, 1, 2, 16, 16, 17]
    """
    v = np.asarray(v, dtype=np.int64)
    mag = np.where(v < 0, ~v, v)
    return np.where(mag == 0, 0, frexp_exponent(mag)) + 1


def shl(v, amount) -> np.ndarray:
    """lib_nn's ``shl``: ``v << amount`` wrapping in 64 bits for ``amount >= 0``, else the
    rounding right shift ``(v + 2**(s-1)) >> s`` (ties toward +inf) with ``s = -amount``.

    >>> shl(np.array([3, -3, 5, -5]), np.array([2, 2, -1, -1])).tolist()
    [12, -12, 3, -2]
    """
    v = np.asarray(v, dtype=np.int64)
    a = np.asarray(amount, dtype=np.int64)
    s = np.maximum(-a, 1)
    right = (v + (np.int64(1) << (s - 1))) >> s
    left = np.left_shift(v, np.maximum(a, 0))
    return np.where(a >= 0, left, right)


def float_to_int(f, e) -> np.ndarray:
    """``(int64)rint(ldexp(f, e))``, ties to even (lib_nn ``float_to_int``)."""
    return np.rint(np.ldexp(np.asarray(f, np.float64), np.asarray(e, np.int64))).astype(np.int64)


def float_to_int16(f, e) -> np.ndarray:
    """``float_to_int`` clamped to the two's-complement int16 range (not the VPU's symmetric)."""
    return np.clip(float_to_int(f, e), -32768, 32767).astype(np.int16)


def bias_correction(b: int) -> float:
    """``1.0 / (1 << b)`` as x86 evaluates it: the shift count is masked to 5 bits and the
    result is an int32 (``1 << 31`` is ``-2**31``). Only ``0 <= b <= 30`` is defined C.

    >>> [bias_correction(b) for b in (0, 3, 31, 32)]
    [1.0, 0.125, -4.656612873077393e-10, 1.0]
    """
    p = int(wrap(1 << (b & 31), 32))
    return 1.0 / p


def _fits16(v) -> np.ndarray:
    return count_bits(v) <= 16


def _max_exponent(v) -> int:
    """The largest ``frexp`` exponent over the nonzero ``v``; ``None`` if all are zero."""
    v = np.asarray(v, np.float64)
    nz = v[v != 0]
    return int(frexp_exponent(nz).max()) if nz.size else None


def _acc_bits(acc_min, acc_max) -> np.ndarray:
    """Per channel: the larger ``frexp`` exponent of the nonzero accumulator bounds (else 0)."""
    e_hi = np.where(acc_max != 0, frexp_exponent(acc_max), 0)
    e_lo = np.where(acc_min != 0, frexp_exponent(acc_min), 0)
    return np.maximum(np.maximum(e_hi, e_lo), 0)


def _products(hi16, lo16, m16, shr):
    p_hi = shl(hi16 * m16, -shr)
    p_lo = shl(lo16 * m16, -shr)
    return np.minimum(p_lo, p_hi), np.maximum(p_lo, p_hi)


def solve_group(mul, bias, acc_min, acc_max, vlmul_shr: int = VLMUL_SHR) -> tuple[int, int]:
    """``(A, M)`` of ``OutputTransformFnInt8_Group::Quantizer::solve_for_constraints``.

    Starts at ``A = 15 - maxexp(acc bounds)``, ``M = 15 - maxexp(mul)`` and lowers one of them
    until every channel has ``acc * 2**A``, ``rint(mul * 2**M)``, ``rint(bias * 2**(A+M-shr))``,
    both rounded products and both sums within 16 bits. The first failing channel decides: an
    accumulator overflow lowers ``A``, a multiplier overflow ``M``, anything else ``A`` while
    ``A >= 0`` or the accumulator has more significant bits, else ``M``. No product range at
    all (every multiplier or every bound zero): ``(0, vlmul_shr)``.
    """
    mul, bias = np.asarray(mul, np.float64), np.asarray(bias, np.float64)
    acc_min, acc_max = np.asarray(acc_min, np.int64), np.asarray(acc_max, np.int64)
    acc_defined = bool(np.any(acc_min != 0) or np.any(acc_max != 0))
    m_exp = _max_exponent(mul)
    if not acc_defined or m_exp is None:
        return 0, vlmul_shr
    a, m = 15 - int(_acc_bits(acc_min, acc_max).max()), 15 - m_exp
    mul_sig = int(count_bits(float_to_int(mul, m)).max())
    acc_sig = int(np.maximum(count_bits(shl(acc_max, a)), count_bits(shl(acc_min, a))).max())
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(_MAX_STEPS):
            hi16, lo16 = shl(acc_max, a), shl(acc_min, a)
            f_acc = ~_fits16(hi16) | ~_fits16(lo16)
            m16 = float_to_int(mul, m)
            f_mul = ~_fits16(m16)
            b16 = float_to_int(bias, a + m - vlmul_shr)
            p_lo, p_hi = _products(hi16, lo16, m16, vlmul_shr)
            f_rest = ~(_fits16(p_hi) & _fits16(p_lo) & _fits16(p_hi + b16))
            f_rest |= ~(_fits16(p_lo + b16) & _fits16(b16))
            bad = f_acc | f_mul | f_rest
            if not bad.any():
                return a, m
            c = int(np.argmax(bad))
            lower_a = bool(f_acc[c]) or (not f_mul[c] and (a >= 0 or acc_sig > mul_sig))
            if lower_a:
                a, acc_sig = a - 1, acc_sig - 1
            else:
                m, mul_sig = m - 1, mul_sig - 1
    raise UnsupportedError(f"group OT search did not converge (A={a}, M={m}); report this layer")


def quantize_group(mul, bias, acc_min, acc_max, vlmul_shr: int = VLMUL_SHR):
    """``(mul16, bias16, initial_shr, final_shr)`` of the group quantizer.

    ``mul16 = sat16(rint(mul * 2**M))``, ``bias16 = sat16(rint((bias - 1/(1<<B)) * 2**B))``
    (the ``float_to_int16_with_bias`` correction for the double rounding in VLASHR+VDEPTH8),
    ``B = A + M - shr``, ``initial_shr = -A``, ``final_shr = B - 8``. Saturation is to the
    two's-complement int16 range. ``B`` outside ``[0, 30]`` follows x86's masked shift.
    """
    a, m = solve_group(mul, bias, acc_min, acc_max, vlmul_shr)
    b = a + m - vlmul_shr
    mul16 = float_to_int16(mul, m)
    bias16 = float_to_int16(np.asarray(bias, np.float64) - bias_correction(b), b)
    return mul16, bias16, -a, b - 8


def _global_b(bias) -> int:
    bias = np.asarray(bias, np.float64)
    nz = bias[bias != 0]
    bits = frexp_exponent(nz)
    ok = _fits16(float_to_int(nz, 15 - bits))
    best = int(bits[ok].max()) if ok.any() else 0
    return max(15 - max(best, 0), 1)


def _channel_search(mul, acc_min, acc_max, defined, vlmul_shr):
    """The per-channel ``A``/``M`` search of the channelwise quantizer (masked, vectorised)."""
    a = np.where(defined, 15 - _acc_bits(acc_min, acc_max), 0)
    m = np.where(defined, 15 - frexp_exponent(mul), 0)
    mul_sig = count_bits(float_to_int(mul, m))
    acc_sig = np.maximum(count_bits(shl(acc_max, a)), count_bits(shl(acc_min, a)))
    active = defined.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(_MAX_STEPS):
            if not active.any():
                return a, m
            hi16, lo16 = shl(acc_max, a), shl(acc_min, a)
            f_acc = active & ~(_fits16(hi16) & _fits16(lo16))
            a, acc_sig = a - f_acc, acc_sig - f_acc
            m16 = float_to_int(mul, m)
            f_mul = active & ~_fits16(m16)
            m, mul_sig = m - f_mul, mul_sig - f_mul
            # the C checks the products of the values computed before this step's decrements
            p_lo, p_hi = _products(hi16, lo16, m16, vlmul_shr)
            f_prod = active & ~(_fits16(p_hi) & _fits16(p_lo))
            dec_a = f_prod & ((a >= 0) | (acc_sig > mul_sig))
            dec_m = f_prod & ~dec_a
            a, acc_sig = a - dec_a, acc_sig - dec_a
            m, mul_sig = m - dec_m, mul_sig - dec_m
            active = f_acc | f_mul | f_prod
    raise UnsupportedError("channelwise OT search did not converge; report this layer")


def quantize_channelwise(mul, bias, acc_min, acc_max, vlmul_shr: int = VLMUL_SHR):
    """``(shift16, mul16, bias16, final_shr)`` of the channelwise quantizer.

    ``B = max(15 - maxexp(bias that fits int16 at that exponent), 1)``; per channel ``A_c``,
    ``M_c`` searched so accumulator, multiplier and products fit 16 bits; ``A_c`` forced
    ``<= 0``; ``B`` lowered to ``min(A_c + M_c - shr)``; then the larger of each channel's
    significant-bit counts is lowered until ``A_c + M_c - shr == B``. ``shift = -A_c``,
    ``mul16 = sat16(rint(mul * 2**M_c))``, ``bias16 = sat16(rint(bias * 2**B))`` (no -1 LSB),
    ``final_shr = B - 8``.
    """
    mul, bias = np.asarray(mul, np.float64), np.asarray(bias, np.float64)
    acc_min, acc_max = np.asarray(acc_min, np.int64), np.asarray(acc_max, np.int64)
    gb = _global_b(bias)
    defined = ((acc_min != 0) | (acc_max != 0)) & (mul != 0)
    a, m = _channel_search(mul, acc_min, acc_max, defined, vlmul_shr)
    m = np.where(defined, m, gb + vlmul_shr)
    a = np.minimum(a, 0)
    gb = min(gb, int((a + m - vlmul_shr).min())) if a.size else gb
    mul_sig = count_bits(float_to_int(mul, m))
    acc_sig = np.maximum(count_bits(shl(acc_max, a)), count_bits(shl(acc_min, a)))
    excess = a + m - vlmul_shr - gb
    for _ in range(int(excess.max()) if excess.size else 0):
        act = excess > 0
        dec_a = act & (acc_sig > mul_sig)
        dec_m = act & ~dec_a
        a, acc_sig = a - dec_a, acc_sig - dec_a
        m, mul_sig = m - dec_m, mul_sig - dec_m
        excess = excess - act
    shift = (-a).astype(np.int16)
    return shift, float_to_int16(mul, m), float_to_int16(bias, gb), gb - 8
