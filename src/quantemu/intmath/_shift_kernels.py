"""The int64 kernels behind :mod:`quantemu.intmath.rounding`: exact ``round(x / 2**s)``.

Each kernel writes into ``out``, which is either a fresh array or ``x`` itself (in place), so
that :func:`~quantemu.intmath.parallel.map_chunks` can hand every chunk of a large array to
another core. Every kernel is exact on any sub-array: the range scans that choose between a
fast path and the exact one are done on the array the kernel is given.

The general path works from the floor quotient ``q = x >> s`` and the remainder
``r = x & (2**s - 1)``; it never adds to ``x`` and so cannot overflow. For one shift in
``[1, 62]`` a faster path adds a rounding bias ``c`` and shifts once, ``(x + c) >> s``, after
one ``max`` shows ``max(x) + c <= 2**63 - 1`` (every bias is ``>= 0``, so the low side cannot
overflow). Half to even on ``|x| < 2**51`` rounds instead by one binary64 addition of a "magic"
constant, exact as proved in :func:`_half_even_binary64`. Each pass over the data costs about as
much as the arithmetic, so the paths count passes and never hold a second full-size temporary
(fresh pages fault in, which costs more than the arithmetic).
"""

from __future__ import annotations

import numpy as np

from quantemu.intmath._arrays import INT64_MAX

HALF_UP, HALF_DOWN, HALF_EVEN, HALF_AWAY = "half_up", "half_down", "half_even", "half_away"
FLOOR, TOWARD_ZERO = "floor", "toward_zero"


def round_from_floor(x, s, rule: str):
    """Exact ``round(x / 2**s)`` from the floor quotient and the remainder.

    Valid for int64 ``x`` with ``0 <= s <= 63`` and for object ``x`` (Python ints) with any
    ``s >= 0`` (then ``s`` must be Python ints too). Bounds for int64: ``mask = 2**s - 1`` is
    formed as ``(2**63 - 1) >> (63 - s)`` and ``half <= 2**62``; ``|q| <= 2**62`` when
    ``s >= 1``, so ``q + 1`` fits, and ``inc`` is 0 when ``s == 0`` (``r == 0 < half == 1``).
    """
    if x.dtype == object:
        if x.ndim == 0:
            x = x.item()  # plain Python ints: NumPy bools would not add to huge ints
        mask = (np.asarray(1, dtype=object) << s) - 1
    else:
        mask = np.int64(INT64_MAX) >> (63 - s)
    q = x >> s
    if rule == FLOOR:
        return q
    r = x & mask
    if rule == TOWARD_ZERO:
        inc = (r != 0) & (x < 0)
    else:
        half = (mask >> 1) + 1  # 2**(s-1); 1 when s == 0, so no tie or round-up test fires
        if rule == HALF_UP:
            inc = r >= half
        elif rule == HALF_DOWN:
            inc = r > half
        else:
            tie_up = (q & 1) == 1 if rule == HALF_EVEN else x >= 0
            inc = (r > half) | ((r == half) & tie_up)
    return q + inc


def round_into(out: np.ndarray, x: np.ndarray, s: int, rule: str, bound: int | None) -> None:
    """``out[...] = round(x / 2**s)`` for int64 ``x`` and ``1 <= s <= 62``.

    ``out`` is a fresh int64 array of ``x``'s shape, or ``x`` itself. ``bound``: a bound of
    ``|x|`` the caller has proved (lets the fast paths skip their scans).
    """
    if rule == FLOOR:
        np.right_shift(x, s, out=out)
        return
    if rule == HALF_EVEN:
        xmin, xmax = _range(x, bound)
        if s <= _EVEN_MAX_SHIFT and x.ndim and xmin >= -_EVEN_SPAN and xmax < _EVEN_SPAN:
            _half_even_binary64(out, x, s)
            return
    else:
        xmax = bound if rule != TOWARD_ZERO and bound is not None else None
    if not _biased_shift(out, x, s, rule, xmax):
        out[...] = round_from_floor(x, s, rule)


def _range(x: np.ndarray, bound: int | None) -> tuple[int, int]:
    if bound is not None:
        return -bound, bound
    if x.size == 0:
        return 0, 0
    return int(x.min()), int(x.max())


def _biased_shift(out, x, s: int, rule: str, xmax: int | None) -> bool:
    """``(x + c) >> s`` with a non-negative bias ``c`` into ``out``; False (nothing written)
    when ``max(x) + c`` could overflow.

    With ``x = q * 2**s + r``, ``0 <= r < 2**s``, and ``h = 2**(s-1)``: half_up ``c = h``
    (carries iff ``r >= h``); half_down ``c = h - 1`` (iff ``r > h``); half_away
    ``c = h - [x < 0]``; half_even ``c = h - 1 + (q & 1)``; toward_zero
    ``c = (2**s - 1) * [x < 0]`` (for ``x < 0``, ``x + c < 2**s - 1``: never overflows).
    ``xmax``: a proven upper bound of ``x`` (skips the ``max`` scan).
    """
    half = 1 << (s - 1)
    if rule != TOWARD_ZERO:
        if xmax is None:
            xmax = int(x.max()) if x.size else 0
        if xmax > INT64_MAX - half:
            return False
    if rule in (HALF_UP, HALF_DOWN):
        np.add(x, half if rule == HALF_UP else half - 1, out=out)
    elif np.may_share_memory(out, x):
        _add_bias_in_place(x, s, rule)
    else:
        _bias(x, s, rule, out)
        out += x
    out >>= s
    return True


def _bias(x: np.ndarray, s: int, rule: str, out: np.ndarray) -> None:
    """The data-dependent bias ``c`` of :func:`_biased_shift` into ``out`` (three passes)."""
    half = 1 << (s - 1)
    if rule == HALF_EVEN:
        np.right_shift(x, s, out=out)
        out &= 1
        out += half - 1
        return
    np.right_shift(x, 63, out=out)  # -1 where x < 0, else 0
    if rule == HALF_AWAY:
        out += half
    else:
        out &= (1 << s) - 1


_BLOCK = 1 << 16  # elements per block of the in-place bias: 512 KiB of int64, in cache


def _add_bias_in_place(x: np.ndarray, s: int, rule: str) -> None:
    """``x += c`` for a data-dependent bias, one block-sized temporary at a time.

    The bias depends on ``x`` itself, so it needs a temporary; a block-sized one is reused
    instead of a second full-size array. A layout with no flat view goes through one full-size
    temporary.
    """
    flat = x.reshape(-1) if x.flags.c_contiguous else x.ravel(order="K")
    if not np.may_share_memory(flat, x):
        tmp = np.empty_like(x)
        _bias(x, s, rule, tmp)
        x += tmp
        return
    tmp = np.empty(min(flat.size, _BLOCK), dtype=np.int64)
    for i in range(0, flat.size, _BLOCK):
        xb = flat[i : i + _BLOCK]
        tb = tmp[: xb.size]
        _bias(xb, s, rule, tb)
        xb += tb


# Round half to even through binary64: A = 1.5 * 2**52 and its encoding.
_A = 1.5 * 2.0**52
_A_BITS = np.int64(0x4338000000000000)
_EVEN_SPAN = 2**51  # the path takes int64 x in [-2**51, 2**51)
_EVEN_MAX_SHIFT = 51


def _half_even_binary64(out: np.ndarray, x: np.ndarray, s: int) -> None:
    """``rne(x / 2**s)`` by one binary64 addition: three passes instead of five.

    For int64 ``x`` in ``[-2**51, 2**51)`` and ``1 <= s <= 51`` (the caller checks). Exact:

    1. ``t = x + bits(A)`` in int64 (``0 < bits(A) - 2**51 <= t < bits(A) + 2**51 < 2**63``: no
       overflow). ``bits(A)`` has significand field ``2**51``, so ``t`` has field
       ``x + 2**51`` in ``[0, 2**52)`` and A's exponent: read as binary64, ``t`` is ``A + x``.
    2. ``+= C`` in binary64, ``C = M - A`` with ``M = 1.5 * 2**(52+s)``: ``C = 3 * (2**s - 1) *
       2**51`` has ``s + 2 <= 53`` significant bits, so it is exact, and the addition rounds the
       exact sum ``x + M`` once, to nearest with ties to even (IEEE 754's default, which NumPy
       never changes). ``x + M`` lies strictly inside ``[2**(52+s), 2**(53+s))``, where binary64
       values are the multiples of ``2**s``: the sum becomes ``k * 2**s`` with
       ``k = rne(x / 2**s + 1.5 * 2**52) = rne(x / 2**s) + 1.5 * 2**52`` (the shift by an even
       integer keeps ties even; the significand's parity is ``k``'s, as ``2**52`` is even).
    3. In that binade the encoding is affine with step ``2**s``, so ``bits(k * 2**s) - bits(M)
       = k - 1.5 * 2**52 = rne(x / 2**s)``, and the int64 subtraction of two positive int64
       encodings cannot overflow.
    """
    m = 1.5 * 2.0 ** (52 + s)
    np.add(x, _A_BITS, out=out)
    f = out.view(np.float64)
    f += m - _A
    out -= np.float64(m).view(np.int64)
