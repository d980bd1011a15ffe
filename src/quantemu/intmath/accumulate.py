"""Saturating accumulation with a declared granularity and order.

Hardware accumulators that saturate are not associative: *when* the clamp happens changes the
result once a running sum reaches a rail. :func:`accumulate` adds products in the order they lie
along ``axis`` and clamps with the declared :class:`~quantemu.intmath.policies.Granularity`.

How it stays fast (DESIGN principle 8). The exact prefix sums tell, per output, whether any clamp
can engage at all: if every exact running sum stays inside the bounds, no clamp ever changes
anything (by induction), and the result is the exact total. Only outputs whose exact prefix
leaves the range pay for the order-faithful evaluation, which composes the per-step functions
``x -> clamp(x + s, lo, hi)`` in a pairwise tree: ``log2(steps)`` vectorised rounds, no loop over
elements or steps. The same test also yields the saturation flag: a clamp engages exactly when
some exact prefix leaves the range (the first such step is clamped for certain).
"""

from __future__ import annotations

import numbers

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import INT64_MAX, as_int_operand, as_result, check_bits
from quantemu.intmath.policies import Bounds, Granularity

_FUNC = "accumulate"


def _bounds(bits: int, bounds: Bounds) -> tuple[int, int]:
    hi = 2 ** (bits - 1) - 1
    return (-hi if bounds is Bounds.SYMMETRIC else -hi - 1), hi


def _check_policy(granularity, chunk, bounds) -> int:
    if not isinstance(granularity, Granularity):
        raise InvalidInputError(
            f"{_FUNC}: granularity must be a Granularity, got {granularity!r}; "
            f"use one of {', '.join('Granularity.' + g.name for g in Granularity)}"
        )
    if not isinstance(bounds, Bounds):
        raise InvalidInputError(f"{_FUNC}: bounds must be a Bounds member, got {bounds!r}")
    if granularity is not Granularity.PER_CHUNK:
        if chunk is not None:
            raise InvalidInputError(
                f"{_FUNC}: chunk = {chunk!r} only applies to Granularity.PER_CHUNK, "
                f"not {granularity}; drop it or use PER_CHUNK"
            )
        return 1
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1:
        raise InvalidInputError(
            f"{_FUNC}: Granularity.PER_CHUNK needs chunk = a positive int, got {chunk!r} "
            "(XS3 VLMACCR adds 32 products per step: chunk=32)"
        )
    return int(chunk)


def _steps(products: np.ndarray, chunk: int) -> np.ndarray:
    """Sum consecutive groups of ``chunk`` products along the last axis (last group shorter)."""
    if chunk == 1:
        return products
    k = products.shape[-1]
    pad = -k % chunk
    if pad:
        # Not np.pad: on object arrays it pads with np.int64 zeros, which would turn the exact
        # Python-int sums back into wrapping int64 ones.
        zeros = np.zeros((*products.shape[:-1], pad), dtype=products.dtype)
        products = np.concatenate([products, zeros], axis=-1)
    grouped = products.reshape(*products.shape[:-1], (k + pad) // chunk, chunk)
    return grouped.sum(axis=-1)


def _fits_int64(p: np.ndarray, init: np.ndarray, bits: int) -> bool:
    """Every partial sum, bound and composed offset below stays inside int64.

    Partial sums are bounded by max|init| + K * max|product|; the tree composition adds offsets
    to bounds of magnitude <= 2**(bits-1), so that term is added once more.
    """
    if "O" in (p.dtype.kind, init.dtype.kind):
        return False
    pmax = int(np.abs(p).max()) if p.size else 0
    imax = int(np.abs(init).max()) if init.size else 0
    return imax + p.shape[-1] * pmax + 2 ** (bits - 1) <= INT64_MAX


def _compose_clamps(s: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """Fold ``x -> clamp(x + s_i, lo, hi)`` over the last axis into one ``(S, L, H)``.

    The composite of ``f = (s1, L1, H1)`` then ``g = (s2, L2, H2)`` is
    ``(s1 + s2, clamp(L1 + s2, L2, H2), clamp(H1 + s2, L2, H2))``; the result applies as
    ``clamp(x + S, L, H)``. Padding with ``(0, lo, hi)`` at the *end* is harmless because every
    real step already leaves its value inside ``[lo, hi]``.
    """
    n = s.shape[-1]
    width = 1 << (n - 1).bit_length()
    if width != n:
        s = np.concatenate([s, np.zeros((*s.shape[:-1], width - n), dtype=s.dtype)], axis=-1)
    low = np.full(s.shape, lo, dtype=s.dtype)
    high = np.full(s.shape, hi, dtype=s.dtype)
    while s.shape[-1] > 1:
        s1, s2 = s[..., 0::2], s[..., 1::2]
        l1, l2 = low[..., 0::2], low[..., 1::2]
        h1, h2 = high[..., 0::2], high[..., 1::2]
        low = np.minimum(np.maximum(l1 + s2, l2), h2)
        high = np.minimum(np.maximum(h1 + s2, l2), h2)
        s = s1 + s2
    return s[..., 0], low[..., 0], high[..., 0]


def _accumulate(products, *, init, bits, granularity, chunk, bounds, axis):
    chunk = _check_policy(granularity, chunk, bounds)
    bits = check_bits(bits, func=_FUNC)
    p, p_scalar = as_int_operand(products, func=_FUNC, name="products")
    if p_scalar or p.ndim == 0:
        raise InvalidInputError(
            f"{_FUNC}: products must be an array with a reduction axis, got a scalar"
        )
    i, i_scalar = as_int_operand(init, func=_FUNC, name="init")
    try:
        p = np.moveaxis(p, axis, -1)
        out_shape = np.broadcast_shapes(p.shape[:-1], i.shape)
    except (ValueError, IndexError) as exc:  # AxisError derives from both
        raise InvalidInputError(
            f"{_FUNC}: products of shape {np.shape(products)} (axis={axis}) and init of shape "
            f"{i.shape} do not broadcast: {exc}"
        ) from None
    if not _fits_int64(p, i, bits):
        p, i = p.astype(object), i.astype(object)
    p = np.broadcast_to(p, (*out_shape, p.shape[-1]))
    i = np.broadcast_to(i, out_shape)
    lo, hi = _bounds(bits, bounds)
    scalar_out = i_scalar and p.ndim == 1
    return p, i, lo, hi, chunk, scalar_out


def accumulate_count(
    products,
    *,
    bits: int,
    granularity: Granularity,
    chunk: int | None = None,
    init=0,
    bounds: Bounds = Bounds.TWOS_COMPLEMENT,
    axis: int = -1,
):
    """:func:`accumulate` that also returns, per output, whether any clamp engaged.

    Returns ``(acc, saturated)``: ``saturated`` is a bool array of the output shape (a Python
    bool for a 1-D ``products`` with a scalar ``init``). Hardware accumulator-saturation
    counters are ``saturated.sum()``.

    >>> accumulate_count([100, 100, -100], bits=8, granularity=Granularity.PER_PRODUCT)
    (27, True)
    >>> accumulate_count([100, 100, -100], bits=8, granularity=Granularity.AT_END)
    (100, False)
    """
    p, i, lo, hi, chunk, scalar_out = _accumulate(
        products,
        init=init,
        bits=bits,
        granularity=granularity,
        chunk=chunk,
        bounds=bounds,
        axis=axis,
    )
    if granularity is Granularity.WRAP:
        total = i + p.sum(axis=-1)
        half = 2 ** (bits - 1)
        # Masking is the two's-complement wrap; the int64 path guarantees total + half fits
        # (_fits_int64) and the mask 2**bits - 1 <= 2**63 - 1 there.
        acc = ((total + half) & (2 * half - 1)) - half
        saturated = np.zeros(acc.shape, dtype=bool)
    elif granularity is Granularity.AT_END:
        total = i + p.sum(axis=-1)
        acc = np.minimum(np.maximum(total, lo), hi)
        saturated = np.asarray(acc != total, dtype=bool)
    else:
        acc, saturated = _accumulate_steps(_steps(p, chunk), i, lo, hi)
    if scalar_out:
        return as_result(np.asarray(acc), True), bool(saturated)
    return np.asarray(acc), np.asarray(saturated, dtype=bool)


def _accumulate_steps(s: np.ndarray, init: np.ndarray, lo: int, hi: int):
    """Clamp after every step along the last axis, paying only where a clamp engages."""
    if s.shape[-1] == 0:
        return init.copy(), np.zeros(init.shape, dtype=bool)
    prefix = np.cumsum(s, axis=-1)
    prefix += init[..., None]
    saturated = (prefix.max(axis=-1) > hi) | (prefix.min(axis=-1) < lo)
    acc = prefix[..., -1].copy()
    if saturated.any():
        total, low, high = _compose_clamps(s[saturated], lo, hi)
        acc[saturated] = np.minimum(np.maximum(init[saturated] + total, low), high)
    return acc, saturated


def accumulate(
    products,
    *,
    bits: int,
    granularity: Granularity,
    chunk: int | None = None,
    init=0,
    bounds: Bounds = Bounds.TWOS_COMPLEMENT,
    axis: int = -1,
):
    """Add ``products`` along ``axis``, in order, to ``init`` in a ``bits``-wide accumulator.

    Formula on ℤ. With ``lo, hi`` the bounds of ``bits`` (``Bounds.TWOS_COMPLEMENT``:
    ``[-2**(b-1), 2**(b-1)-1]``; ``Bounds.SYMMETRIC``: ``±(2**(b-1)-1)``) and the products split
    into steps (one product per step for ``PER_PRODUCT``, ``chunk`` consecutive products per
    step for ``PER_CHUNK``, the last step shorter): ``acc_0 = init``,
    ``acc_j = clamp(acc_{j-1} + sum(step_j), lo, hi)``. ``AT_END``:
    ``clamp(init + sum(products), lo, hi)``. ``WRAP``: ``wrap(init + sum(products), bits)``.

    Policy. ``init`` is loaded as given, never clamped on load (an XS3 bias of ``-2**31`` with
    symmetric bounds stays ``-2**31`` until the first step clamps it); with no products the
    stepwise granularities return ``init`` itself, ``AT_END`` still clamps once. Products and
    ``init`` are exact integers of any size; the computation moves to exact Python ints when a
    bound shows int64 could overflow. ``init`` broadcasts against the output shape (``products``
    without ``axis``).

    Mirrors. ``PER_CHUNK`` with ``chunk=32`` and symmetric 32-bit bounds is XS3 ``VLMACCR``;
    ``PER_PRODUCT`` is lib_nn's ``conv2d_1x1`` host reference and NVDLA CACC (48-bit, two's
    complement); ``AT_END`` is lib_nn ``fully_connected``; ``WRAP`` is plain int32 C arithmetic
    (lib_nn ``conv2d_depthwise`` host reference).

    >>> from quantemu.intmath.policies import Granularity as G, Bounds as B
    >>> p = [100, 100, -100]
    >>> [accumulate(p, bits=8, granularity=g) for g in (G.PER_PRODUCT, G.AT_END, G.WRAP)]
    [27, 100, 100]
    >>> accumulate(p, bits=8, granularity=G.PER_CHUNK, chunk=2)
    27
    >>> accumulate([-100, -100, 100], bits=8, granularity=G.PER_PRODUCT)
    -28
    >>> accumulate([-100, -100, 100], bits=8, granularity=G.PER_PRODUCT, bounds=B.SYMMETRIC)
    -27
    >>> accumulate([1], bits=32, granularity=G.PER_PRODUCT, init=-2**31, bounds=B.SYMMETRIC)
    -2147483647
    >>> accumulate([], bits=32, granularity=G.PER_PRODUCT, init=-2**31, bounds=B.SYMMETRIC)
    -2147483648
    """
    acc, _ = accumulate_count(
        products,
        bits=bits,
        granularity=granularity,
        chunk=chunk,
        init=init,
        bounds=bounds,
        axis=axis,
    )
    return acc
