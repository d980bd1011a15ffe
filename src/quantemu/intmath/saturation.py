"""Saturation (clamping) and two's-complement wrapping to a bit width.

Saturation never wraps and wrapping never saturates: each is a named call (DESIGN principle 1).
The ``*_count`` variants also return how many elements the clamp changed, the quantity that
hardware saturation counters accumulate.

Exactness: int64 operands are clamped against bounds that fit int64 (an unsigned 64-bit upper
bound is above every int64 value, so it is lowered to ``2**63 - 1`` without changing anything);
object arrays (Python ints of any size) are clamped exactly with the same ufuncs. Large int64 arrays
are clamped or wrapped chunk by chunk on several cores (:mod:`quantemu.intmath.parallel`).
"""

from __future__ import annotations

import numpy as np

from quantemu.intmath._arrays import INT64_MAX, as_int_operand, as_result, check_bits
from quantemu.intmath.parallel import map_chunks, splittable

__all__ = [
    "saturate",
    "saturate_count",
    "saturate_symmetric",
    "saturate_symmetric_count",
    "saturate_unsigned",
    "saturate_unsigned_count",
    "wrap",
    "wrap_unsigned",
]


def _clamp(x, bits: int, kind: str, func: str, *, count: bool):
    bits = check_bits(bits, func=func)
    xa, scalar = as_int_operand(x, func=func, name="x")
    hi = (1 << bits) - 1 if kind == "unsigned" else (1 << (bits - 1)) - 1
    lo = 0 if kind == "unsigned" else (-hi if kind == "symmetric" else -hi - 1)
    if xa.dtype != object:
        hi = min(hi, INT64_MAX)  # no int64 value is above a larger bound: nothing changes
        if splittable(xa):
            return _clamp_chunked(xa, lo, hi, count=count)
        y = np.clip(xa, lo, hi)
    elif xa.ndim == 0:
        y = np.asarray(min(max(xa.item(), lo), hi), dtype=object)
    else:
        y = np.minimum(np.maximum(xa, lo), hi)
    y = as_result(np.asarray(y, dtype=xa.dtype), scalar)
    if not count:
        return y
    n = int(np.count_nonzero(np.asarray(y) != xa)) if xa.size else 0
    return y, n


def _clamp_chunked(xa: np.ndarray, lo: int, hi: int, *, count: bool):
    """A large int64 array clamped chunk by chunk on several cores; the counts add up."""

    def kernel(out, xc):
        np.clip(xc, lo, hi, out=out)
        return int(np.count_nonzero(out != xc)) if count else 0

    y = np.empty(xa.shape, dtype=np.int64)
    n = sum(map_chunks(kernel, y, xa))
    return (y, n) if count else y


def saturate(x, bits: int):
    """Clamp ``x`` to the ``bits``-bit two's-complement range.

    Formula on ℤ: ``min(max(x, -2**(bits-1)), 2**(bits-1) - 1)``.

    Policy: values beyond either rail become that rail; no wrap. ``bits`` in ``[1, 64]``
    (``bits = 1`` gives ``[-1, 0]``; ``bits = 64`` is the int64 range, which matters for object
    arrays and huge Python ints).

    Mirrors: every "saturate to int8/int16/int32" stage, e.g. NVDLA's output converters
    (``sat(v, b)`` on the nvdla conformance page) and x86 ``packssdw``/``packsswb``.

    >>> [saturate(v, 8) for v in (-129, -128, -127, 0, 126, 127, 128)]
    [-128, -128, -127, 0, 126, 127, 127]
    >>> [saturate(v, 64) for v in (-2**63 - 1, 2**63, 5)]
    [-9223372036854775808, 9223372036854775807, 5]
    >>> [saturate(v, 1) for v in (-2, -1, 0, 1)]
    [-1, -1, 0, 0]
    """
    return _clamp(x, bits, "twos", "saturate", count=False)


def saturate_symmetric(x, bits: int):
    """Clamp ``x`` to the symmetric range ``±(2**(bits-1) - 1)``.

    Formula on ℤ: ``min(max(x, -(2**(bits-1) - 1)), 2**(bits-1) - 1)``.

    Policy: like :func:`saturate`, but the most negative two's-complement value is never
    produced (-128 becomes -127 for 8 bits). ``bits`` in ``[1, 64]``; ``bits = 1`` gives 0.

    Mirrors: the XMOS XS3 VPU saturation (``VLSAT``, ``VDEPTH8``, ``VLMACCR`` accumulators;
    ``SAT_b`` on the xs3 conformance page).

    >>> [saturate_symmetric(v, 8) for v in (-129, -128, -127, 0, 127, 128)]
    [-127, -127, -127, 0, 127, 127]
    >>> [saturate_symmetric(v, 32) for v in (-2**31, 2**31)]
    [-2147483647, 2147483647]
    """
    return _clamp(x, bits, "symmetric", "saturate_symmetric", count=False)


def saturate_unsigned(x, bits: int):
    """Clamp ``x`` to the unsigned range ``[0, 2**bits - 1]``.

    Formula on ℤ: ``min(max(x, 0), 2**bits - 1)``.

    Policy: negatives become 0, values above the top become ``2**bits - 1``. ``bits`` in
    ``[1, 64]``; for ``bits = 64`` an int64 operand stays int64 (no int64 value exceeds
    ``2**64 - 1``), object operands are clamped exactly.

    Mirrors: x86 ``packuswb``/``packusdw`` (oneDNN u8 outputs), unsigned output converters.

    >>> [saturate_unsigned(v, 8) for v in (-1, 0, 1, 254, 255, 256)]
    [0, 0, 1, 254, 255, 255]
    >>> saturate_unsigned(2**70, 64)
    18446744073709551615
    """
    return _clamp(x, bits, "unsigned", "saturate_unsigned", count=False)


def saturate_count(x, bits: int):
    """:func:`saturate` and the number of elements it changed: ``(y, n)``, ``n`` a Python int.

    Formula, policy, mirrored hardware: those of :func:`saturate`; ``n = #{i : y_i != x_i}``
    (the raw event count that saturation counters, e.g. NVDLA's, are built on).

    >>> y, n = saturate_count(np.array([-300, -128, 0, 127, 128]), 8)
    >>> y.tolist(), n
    ([-128, -128, 0, 127, 127], 2)
    >>> saturate_count(5, 8)
    (5, 0)
    """
    return _clamp(x, bits, "twos", "saturate_count", count=True)


def saturate_symmetric_count(x, bits: int):
    """:func:`saturate_symmetric` and the number of elements it changed: ``(y, n)``.

    Formula, policy, mirrored hardware: those of :func:`saturate_symmetric`; -128 counts as a
    change for 8 bits.

    >>> y, n = saturate_symmetric_count(np.array([-128, -127, 127, 128]), 8)
    >>> y.tolist(), n
    ([-127, -127, 127, 127], 2)
    """
    return _clamp(x, bits, "symmetric", "saturate_symmetric_count", count=True)


def saturate_unsigned_count(x, bits: int):
    """:func:`saturate_unsigned` and the number of elements it changed: ``(y, n)``.

    Formula, policy, mirrored hardware: those of :func:`saturate_unsigned`.

    >>> y, n = saturate_unsigned_count(np.array([-1, 0, 255, 256]), 8)
    >>> y.tolist(), n
    ([0, 0, 255, 255], 2)
    """
    return _clamp(x, bits, "unsigned", "saturate_unsigned_count", count=True)


def wrap(x, bits: int):
    """Two's-complement wrap of ``x`` to ``bits`` bits (keep the low bits, read them as signed).

    Formula on ℤ: ``((x + 2**(bits-1)) mod 2**bits) - 2**(bits-1)``.

    Policy: never saturates; ``bits = 64`` leaves int64 values unchanged and wraps bigger
    Python ints. ``bits`` in ``[1, 64]``. Exact: computed as ``((x & m) ^ h) - h`` with
    ``m = 2**bits - 1``, ``h = 2**(bits-1)``; ``(x & m) ^ h`` is in ``[0, 2**bits)``, so the
    subtraction stays in ``[-h, h)`` (no intermediate leaves int64).

    Mirrors: fixed-width adders without saturation: NVDLA's PDP accumulators and outputs, XS3's
    ``WRAP32`` (lib_nn's int32 rounding add), C's conversion to a narrower signed type on
    two's-complement machines.

    >>> [wrap(v, 8) for v in (-129, -128, -1, 0, 127, 128, 255, 256)]
    [127, -128, -1, 0, 127, -128, -1, 0]
    >>> [wrap(v, 64) for v in (2**63, -2**63 - 1, 2**64 + 5)]
    [-9223372036854775808, 9223372036854775807, 5]
    """
    func = "wrap"
    bits = check_bits(bits, func=func)
    xa, scalar = as_int_operand(x, func=func, name="x")
    if xa.dtype != object and bits == 64:
        return as_result(xa.copy(), scalar)
    h = 1 << (bits - 1)
    if xa.dtype != object and splittable(xa):
        y = np.empty(xa.shape, dtype=np.int64)
        map_chunks(lambda out, xc: _wrap_into(out, xc, bits, h), y, xa)
        return y
    if xa.dtype == object and xa.ndim == 0:
        xa = xa.item()  # plain Python ints
    y = xa & ((1 << bits) - 1)
    y ^= h
    y -= h
    return as_result(y, scalar)


def _wrap_into(out: np.ndarray, x: np.ndarray, bits: int, h: int) -> None:
    np.bitwise_and(x, (1 << bits) - 1, out=out)
    out ^= h
    out -= h


def wrap_unsigned(x, bits: int):
    """``x`` modulo ``2**bits``: the low ``bits`` bits read as unsigned.

    Formula on ℤ: ``x mod 2**bits`` (in ``[0, 2**bits)``).

    Policy: never saturates. ``bits`` in ``[1, 64]``. For ``bits = 64`` the results can exceed
    int64, so an array result is an object array (of Python ints) for every operand.

    Mirrors: unsigned fixed-width registers and raw field reads (``f mod 2**b``).

    >>> [wrap_unsigned(v, 8) for v in (-257, -1, 0, 255, 256)]
    [255, 255, 0, 255, 0]
    >>> wrap_unsigned(-1, 64)
    18446744073709551615
    >>> wrap_unsigned(np.array([-1, 1]), 64).dtype
    dtype('O')
    """
    func = "wrap_unsigned"
    bits = check_bits(bits, func=func)
    xa, scalar = as_int_operand(x, func=func, name="x")
    if bits == 64:
        xa = xa.astype(object)  # results up to 2**64 - 1 do not fit int64
    dtype = xa.dtype
    if dtype.kind == "O" and xa.ndim == 0:
        xa = xa.item()  # plain Python ints
    y = xa & ((1 << bits) - 1)  # int64: the mask is at most 2**63 - 1, & of a mask is >= 0
    return as_result(np.asarray(y, dtype=dtype), scalar)
