"""``XC_softmax`` / ``XC_batched_softmax``: xcore-opt's float32 exp table, lib_nn's float kernel.

xcore-opt 1.4.2 replaces an int8 SOFTMAX with ``beta == 1`` by an XMOS op that takes the input
and one constant: a 256-entry float32 table of ``exp`` on the dequantized input codes
(``ApplyXCPatterns.cpp: getExpLookupF32``, patterns in ``XCPatterns.td``). Which op:

- input rank 2 (``(1, C)``): ``XC_softmax``;
- rank 3 ``(1, T, C)`` with ``T != 1``: ``XC_batched_softmax`` (one row at a time);
- rank 4 ``(1, H, W, C)`` with ``H * W != 1``: TensorFlow's own passes reshape it to
  ``(1, H * W, C)`` first (``XC_no_op``), then ``XC_batched_softmax``;
- ``(1, 1, C)`` and ``(1, 1, 1, C)``: neither pattern matches, SOFTMAX stays TFLite's
  (checked on 1.4.2).

The output quantization is never read: the kernel assumes TFLite's softmax output
(scale 1/256, zero point -128). Both ops compute each row of the last axis the same way
(lib_nn ``softmax.c``; the 1.4.2 host build, read from its disassembly, clamps the result):

1. ``v_i = T[x_i + 128]`` (float32), ``S = v_0 + v_1 + ...`` summed in float32 in index order
   (one thread: xcore-opt's default ``--xcore-thread-count 1``; more threads would sum slices
   and add the partial sums);
2. ``inv = (1.0f / S) * 256.0f`` in float32;
3. ``y_i = roundf(v_i * inv) - 128`` (float32 product, ties away from zero), then
   ``127`` if above 127, ``-128`` if below -128, ``0`` if NaN (``cvttss2si`` of NaN is
   0x80000000, whose low byte is 0).

A row that a single code dominates gives ``v_i * inv`` close to 256, so the winner saturates to
127 (the kernel's 128 would not fit); ``S = inf`` (an entry overflowed: large input scale) gives
``inf * 0 = NaN -> 0`` for the overflowed entries and -128 for the rest; ``S = 0`` or a tiny
``S`` (every entry underflowed) gives ``inv = inf``: NaN -> 0 for zero entries, 127 for others.
"""

from __future__ import annotations

import struct
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from quantemu.errors import InvalidInputError

#: glibc's ``expf`` (ARM optimized-routines): ``2^(k/32)`` from a 32-entry table, a cubic.
_EXP_BITS = 5
_EXP_N = 1 << _EXP_BITS
_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * _EXP_N
_SHIFT = float.fromhex("0x1.8p+52")  # adding it rounds to an integer (ties to even)
_POLY = tuple(
    float.fromhex(c) / _EXP_N**k
    for c, k in (
        ("0x1.c6af84b912394p-5", 3),
        ("0x1.ebfce50fac4f3p-3", 2),
        ("0x1.62e42ff0c52d6p-1", 1),
    )
)
_OVERFLOW = float.fromhex("0x1.62e42ep6")  # above: +inf
_UNDERFLOW = float.fromhex("-0x1.9fe368p6")  # below: +0


def _two_to_the(i: int) -> int:
    """The double nearest ``2**(i/32)`` as its bits, less ``i << 47`` (glibc's ``T[i]``)."""
    with localcontext() as ctx:
        ctx.prec = 60
        value = float(Decimal(2) ** (Decimal(i) / _EXP_N))  # correctly rounded to double
    return struct.unpack("<Q", struct.pack("<d", value))[0] - (i << (52 - _EXP_BITS))


_TABLE = tuple(_two_to_the(i) for i in range(_EXP_N))


def _fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once to double (what an FMA instruction returns)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def _f32(v: float) -> float:
    """Round a double to float32, ties to even (a C ``(float)`` cast; too large: inf)."""
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def expf_glibc(x: float) -> float:
    """glibc's ``expf`` on the float32 ``x`` (the float32 result, as a Python float).

    Formula: ``z = x * 32/ln2`` split into the nearest integer ``k`` and ``r = z - k``;
    ``exp(x) = 2^(k/32) * (1 + c2 r + c1 r^2 + c0 r^3)`` in double, then one rounding to
    float32. Policy: the FMA build (x86-64 with FMA, what glibc picks on such a CPU, and
    aarch64): ``z + shift``, ``z - k`` and the three polynomial steps are fused
    multiply-adds. Not always correctly rounded (within 0.502 ULP): xcore-opt's tables carry
    its results, so a correctly rounded ``exp`` would differ in about 1 entry in 1000. ``x``
    above ``0x1.62e42ep6`` gives ``inf``, below ``-0x1.9fe368p6`` gives 0.
    Mirrors ``sysdeps/ieee754/flt-32/e_expf.c`` (glibc >= 2.27), what ``xcore-opt`` calls.

    >>> [expf_glibc(v) for v in (0.0, 1.0, -104.0, 89.0)]
    [1.0, 2.7182817459106445, 0.0, inf]
    >>> expf_glibc(0.8583748) == _f32(2.3593232631683350)  # correctly rounded: 2.35932302...
    True
    """
    x = _f32(float(x))
    if x > _OVERFLOW:
        return float("inf")
    if x < _UNDERFLOW:
        return 0.0
    kd = _fma(_INV_LN2_N, x, _SHIFT)
    k = int(kd - _SHIFT)  # exact: kd - shift is an integer below 2^12 in magnitude
    r = _fma(_INV_LN2_N, x, -(kd - _SHIFT))
    bits = (_TABLE[k % _EXP_N] + (k << (52 - _EXP_BITS))) % (1 << 64)
    s = struct.unpack("<d", struct.pack("<Q", bits))[0]
    c0, c1, c2 = _POLY
    z = _fma(c0, r, c1)
    y = _fma(c2, r, 1.0)
    y = _fma(z, r * r, y)
    return _f32(y * s)


def softmax_exp_table(scale: float, zero_point: int) -> np.ndarray:
    """xcore-opt's table: ``T[i] = expf((float)((i - 128 - zp) * (double)scale))``, float32.

    The product is a double rounded once to float32 (the C ``float x = ...``); ``expf`` is
    :func:`expf_glibc`. Entry ``i`` belongs to the code ``i - 128``. 256 scalar evaluations
    at lowering time.

    >>> t = softmax_exp_table(0.5, 0)
    >>> float(t[128]), float(t[130]), t.dtype
    (1.0, 2.7182817459106445, dtype('float32'))
    """
    scale = float(np.float32(scale))
    if not np.isfinite(scale) or scale <= 0.0:
        raise InvalidInputError(f"softmax input scale {scale} must be a positive finite float32")
    zp = int(zero_point)
    return np.array(
        [expf_glibc(_f32((i - 128 - zp) * scale)) for i in range(256)], dtype=np.float32
    )


def xc_softmax(codes: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """lib_nn's softmax on every row of the last axis of int8 ``codes`` (module docstring).

    Formula: ``y = clamp(roundf(T[x+128] * ((1 / sum_f32 T[x+128]) * 256)) - 128)``, the
    sum taken left to right in float32. Policy: ``roundf`` ties away from zero; results above
    127 become 127 (a dominant code: the kernel's 128), below -128 become -128, NaN becomes 0.
    Mirrors lib_nn ``softmax_single`` / ``softmax_exp_sum`` + ``softmax_exp_div`` (one thread)
    as the 1.4.2 host interpreter runs them. Counters: ``output_saturated`` (the 128s),
    ``nan_to_zero``.

    >>> t = softmax_exp_table(0.0078125, -128)  # exp(k/128), k = 0..255
    >>> xc_softmax(np.array([[-128, -128], [127, -128], [127, 127]], np.int8), t)[0].tolist()
    [[0, 0], [97, -97], [0, 0]]
    >>> xc_softmax(np.array([[5]], np.int8), t)  # one entry: 256 -> 127
    (array([[127]], dtype=int8), {'output_saturated': 1, 'nan_to_zero': 0})
    >>> xc_softmax(np.array([[127, 0, -128]], np.int8), softmax_exp_table(0.5, -128))  # inf
    (array([[   0, -128, -128]], dtype=int8), {'output_saturated': 0, 'nan_to_zero': 1})
    """
    table = np.asarray(table, np.float32).reshape(-1)
    if table.size != 256:
        raise InvalidInputError(f"softmax exp table has {table.size} entries, expected 256")
    v = table[np.asarray(codes, np.int8).astype(np.int64) + 128]
    # ufunc.accumulate adds strictly left to right (out[i] = out[i-1] + v[i]) in float32,
    # unlike add.reduce, whose pairwise order would change the rounding
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        total = np.add.accumulate(v, axis=-1, dtype=np.float32)[..., -1:]
        inv = (np.float32(1.0) / total) * np.float32(256.0)
        p = v * inv
    # roundf on p >= 0: p + 0.5 is exact in double (p is a float32 below 2^9) except when p is
    # too small to matter; inf and NaN pass through
    r = np.floor(p.astype(np.float64) + 0.5) - 128.0
    nan = np.isnan(r)
    high = r > 127.0
    y = np.where(nan, 0.0, np.clip(r, -128.0, 127.0)).astype(np.int8)
    counters = {"output_saturated": int(np.count_nonzero(high)), "nan_to_zero": int(nan.sum())}
    return y, counters


__all__ = ["expf_glibc", "softmax_exp_table", "xc_softmax"]
