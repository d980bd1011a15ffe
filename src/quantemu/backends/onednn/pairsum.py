"""The u8·s8 dot products of oneDNN's int8 kernels, as batched matrix products (page §2).

``exact_matmul`` is what VNNI/AMX compute: the exact sum of products. ``pair_sum_matmul`` is what
the non-VNNI sequence ``VPMADDUBSW`` + ``VPMADDWD`` + ``VPADDD`` computes: the reduction axis is
consumed in adjacent pairs ``(2j, 2j+1)``, each pair sum is saturated to s16, and the saturated
pair sums are added exactly.

How it stays fast (DESIGN principle 8). Both start from one exact BLAS product: float32 GEMMs
over runs of the reduction short enough that no partial sum can exceed 2**24
(:func:`quantemu.intmath.matmul_exact`). Saturation only changes the pairs whose sum can leave
``[-32768, 32767]``; a cheap bound finds them from the column ranges ``[amin_k, amax_k]`` of
``a`` and the weights alone (no per-row work): the pair ``(k0, k1)`` of column ``n`` lies between
``Σ_i min(amin_ki·b_ki, amax_ki·b_ki)`` and ``Σ_i max(amin_ki·b_ki, amax_ki·b_ki)``. Only the
pairs whose range crosses a rail ("risky" pairs) get the correction ``sat16(p0 + p1) − (p0 + p1)``,
computed for those pairs alone over all rows and added back per output. When most pairs are
risky (weights near ±127 of one sign against activations near 255), every pair is evaluated
directly instead, in blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.intmath import matmul_exact, saturate
from quantemu.intmath.matmul import ArrayCache

__all__ = [
    "ArrayCache",
    "PairSumResult",
    "correct_pair_sums",
    "exact_matmul",
    "pair_sum_matmul",
    "risky_pairs",
]

S16_MIN = -(2**15)
S16_MAX = 2**15 - 1

# Elements of the (rows x risky pairs) product block formed at once: bounds the working memory
# of the correction to a few tens of MB whatever the number of risky pairs.
_BLOCK_ELEMENTS = 1 << 21
# Above one risky pair in _DENSE_RATIO, every pair is evaluated directly (about 5x cheaper per
# pair than the gather-and-correct path).
_DENSE_RATIO = 5


@dataclass(frozen=True)
class PairSumResult:
    """Pair-saturated sums and what saturation did to them.

    ``acc``: int64, shape ``(G, M, N)``. ``saturated_pairs``: how many (output, pair) sums were
    clamped to s16. ``risky_pairs``: how many (column, pair) combinations the bound could not
    rule out (the work the correction paid for).
    """

    acc: np.ndarray
    saturated_pairs: int
    risky_pairs: int


# VNNI/AMX compute the exact sum of products: intmath's exact GEMM, whose float32 runs (and their
# cache for read-only weights) keep it at BLAS speed. ``ArrayCache`` serves conv.py's weight cache.
exact_matmul = matmul_exact


def risky_pairs(
    a_min: np.ndarray, a_max: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices ``(g, n, j)`` of the pairs ``(2j, 2j+1)`` of ``b[g, :, n]`` that can saturate s16.

    ``a_min``/``a_max`` ``(G, L)`` bound the values that meet row ``k`` of ``b`` ``(G, L, N)``.
    Two stages. A prefilter on magnitudes, ``max|a| · (|b0| + |b1|) <= 32767``, clears almost
    every pair with three passes over int16 data (``|b0| + |b1| <= 510``). The survivors get the
    exact bound: the pair sum lies in ``[Σ_i min(lo_i·b_i, hi_i·b_i), Σ_i max(lo_i·b_i,
    hi_i·b_i)]`` and both ends are attained, so a pair is risky iff that range leaves s16
    (int32 holds every term: ``2·255·255 < 2**31``).
    """
    a_mag = max(int(np.abs(a_min).max(initial=0)), int(np.abs(a_max).max(initial=0)))
    if a_mag == 0:
        return (np.zeros(0, np.intp),) * 3
    if a_mag <= 255:
        # The prefilter's survivors at the smallest threshold, with their weights and flat
        # operand indices, depend on the weights alone: found once per weight matrix. Narrowing
        # them to this call's threshold is skipped: the exact bound below clears every pair the
        # narrowing would (|pair| <= a_mag·(|b0| + |b1|) <= 32767), in the same order.
        gi, ni, ji, flat, b01 = _PAIR_CANDIDATES.get(b, "bounds", lambda: _candidate_bounds(b))
    else:
        gi, ji, ni, _ = _candidates(b, S16_MAX // a_mag)
        flat = gi * b.shape[1] + 2 * ji
        b01 = (b[gi, 2 * ji, ni].astype(np.int32), b[gi, 2 * ji + 1, ni].astype(np.int32))
    lo_flat = a_min.reshape(-1)
    hi_flat = a_max.reshape(-1)
    upper = np.zeros(gi.size, np.int32)
    lower = np.zeros(gi.size, np.int32)
    for offset, bk in enumerate(b01):
        lo = lo_flat.take(flat + offset).astype(np.int32) * bk
        hi = hi_flat.take(flat + offset).astype(np.int32) * bk
        upper += np.maximum(lo, hi)
        lower += np.minimum(lo, hi)
    keep = (upper > S16_MAX) | (lower < S16_MIN)
    return gi[keep], ni[keep], ji[keep]


def _candidate_bounds(b: np.ndarray) -> tuple[np.ndarray, ...]:
    """``_candidates`` at ``a_mag = 255`` as ``(g, n, j, flat index of k0 in (G, L), (b0, b1))``."""
    gi, ji, ni, _ = _candidates(b, S16_MAX // 255)
    flat = gi * b.shape[1] + 2 * ji
    b01 = (b[gi, 2 * ji, ni].astype(np.int32), b[gi, 2 * ji + 1, ni].astype(np.int32))
    for arr in (flat, *b01):
        arr.setflags(write=False)
    return gi, ni, ji, flat, b01


_PAIR_CANDIDATES = ArrayCache()


def _candidates(b: np.ndarray, threshold: int) -> tuple[np.ndarray, ...]:
    """``(g, j, n, |b0| + |b1|)`` of the pairs with ``|b0| + |b1| > threshold``, C order."""
    b_abs = np.abs(b.astype(np.int16))
    pair_mag = b_abs[:, 0::2, :] + b_abs[:, 1::2, :]  # (G, J, N)
    gi, ji, ni = np.nonzero(pair_mag > threshold)
    found = (gi, ji, ni, pair_mag[gi, ji, ni])
    for arr in found:
        arr.setflags(write=False)
    return found


def pair_sum_matmul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    a_min: np.ndarray | None = None,
    a_max: np.ndarray | None = None,
) -> PairSumResult:
    """``out[g,m,n] = Σ_j sat16(a[g,m,2j]·b[g,2j,n] + a[g,m,2j+1]·b[g,2j+1,n])``.

    ``a`` ``(G, M, L)`` and ``b`` ``(G, L, N)`` are integer arrays with values in
    ``[-255, 255]`` and an even ``L`` (callers zero-pad each segment to an even length first:
    page §2, ``pair_sum``). ``a_min``/``a_max`` ``(G, L)`` may narrow the bound used to find the
    pairs that can saturate (defaults: the column ranges of ``a``); they must contain every value.
    The result equals the sequential definition exactly (see the module docstring).
    """
    g, m, length = a.shape
    n = b.shape[2]
    acc = exact_matmul(a, b)  # (wasted only in the rare dense case below)
    if m == 0 or n == 0 or length == 0:
        return PairSumResult(acc, 0, 0)
    if a_min is None:
        a_min = a.min(axis=1)
    if a_max is None:
        a_max = a.max(axis=1)
    gi, ni, ji = risky_pairs(a_min, a_max, b)
    if gi.size == 0:
        return PairSumResult(acc, 0, 0)
    if gi.size * _DENSE_RATIO > g * n * (length // 2):
        # Most pairs are risky: evaluating every pair directly is cheaper than gathering them.
        acc, saturated = _dense_pair_sums(a, b)
        return PairSumResult(acc, saturated, int(gi.size))
    # Sort by output column (g, n): each block then sums runs of equal columns in one pass.
    order = np.argsort(gi * n + ni, kind="stable")
    gi, ni, ji = gi[order], ni[order], ji[order]
    saturated = 0
    block = max(1, _BLOCK_ELEMENTS // m)
    for start in range(0, gi.size, block):  # blocks bound memory; each is fully vectorised
        sl = slice(start, start + block)
        saturated += _correct_block(a, b, (gi[sl], ni[sl], ji[sl]), acc)
    return PairSumResult(acc, saturated, int(gi.size))


def _correct_block(
    a: np.ndarray, b: np.ndarray, pairs: tuple[np.ndarray, ...], acc: np.ndarray
) -> int:
    """Add ``sat16(p) - p`` of the risky pairs ``(g, n, j)`` into ``acc[g, m, n]``."""
    gi, ni, ji = pairs
    k0 = 2 * ji
    # (M, R) operands of the risky pairs, gathered row by row (a's rows are contiguous);
    # |p| <= 2 * 255 * 255 < 2**31 fits int32.
    rows = a.transpose(1, 0, 2)
    p = rows[:, gi, k0] * b[gi, k0, ni].astype(np.int32)  # at least int32
    p += rows[:, gi, k0 + 1] * b[gi, k0 + 1, ni].astype(np.int32)
    outside = (p > S16_MAX) | (p < S16_MIN)  # the pair sums that saturate
    count = int(np.count_nonzero(outside))
    if count == 0:
        return 0
    if count * 16 < outside.size:
        # Few saturate: correct just those (np.add.at sums repeated columns).
        mi, ri = np.nonzero(outside)
        over = p[mi, ri]
        np.add.at(acc, (gi[ri], mi, ni[ri]), saturate(over, 16) - over)
        return count
    column = gi * b.shape[2] + ni  # sorted: equal columns are consecutive
    # Many saturate: one dense pass, then sum each run of equal columns. The columns of the
    # runs are distinct, so the fancy-indexed += sees no duplicate index.
    delta = saturate(p, 16) - p
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    acc[gi[starts], :, ni[starts]] += np.add.reduceat(delta, starts, axis=1).T
    return count


def _dense_pair_sums(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """Every pair sum of every output, saturated and added: ``(acc (G, M, N), saturated)``.

    A loop over blocks of pairs, each fully vectorised over all outputs; the block size bounds
    the (G, M, pairs, N) int32 working array (|pair| <= 2·255·255 < 2**31). The running total
    stays below 32768·L/2 in magnitude, far inside int64.
    """
    g, m, length = a.shape
    n = b.shape[2]
    acc = np.zeros((g, m, n), dtype=np.int64)
    saturated = 0
    step = max(1, _BLOCK_ELEMENTS // max(1, g * m * n))
    a32 = a.astype(np.int32)
    b32 = b.astype(np.int32)
    for j0 in range(0, length // 2, step):
        k = slice(2 * j0, 2 * (j0 + step), 2)
        k1 = slice(2 * j0 + 1, 2 * (j0 + step) + 1, 2)
        p = a32[:, :, k, None] * b32[:, None, k, :]
        p += a32[:, :, k1, None] * b32[:, None, k1, :]
        clipped = saturate(p, 16)
        saturated += int(np.count_nonzero(clipped != p))
        acc += clipped.sum(axis=2)
    return acc, saturated


def correct_pair_sums(
    acc: np.ndarray, cols_t: np.ndarray, slots: np.ndarray, b: np.ndarray
) -> tuple[int, int]:
    """Turn the exact product ``acc (G, M, N)`` into the pair-saturated one, in place.

    ``cols_t (G, K, M)`` (C-contiguous, 8-bit) holds the operand that ``acc`` was computed from,
    one reduction index per row; ``slots (L,)`` maps each slot of ``b (G, L, N)``'s pairing order
    to its row (any row for a padding slot: its weight is 0). The result equals
    ``pair_sum_matmul(cols_t[:, slots].transpose(0, 2, 1), b)``, but the exact GEMM runs on the
    dense operand and the risky pairs read whole contiguous rows of ``cols_t``. One min/max scan
    of the 8-bit operand bounds the slots. Returns ``(saturated pairs, risky pairs)``. ``acc``
    may be int32 when the caller has proved the exact product inside s32: saturation only
    shrinks pair sums, so every partial state stays inside that bound.
    """
    g, m, n = acc.shape
    if m == 0 or n == 0 or b.shape[1] == 0:
        return 0, 0
    a_min = cols_t.min(axis=2)[:, slots]
    a_max = cols_t.max(axis=2)[:, slots]
    gi, ni, ji = risky_pairs(a_min, a_max, b)
    if gi.size == 0:
        return 0, 0
    if gi.size * _DENSE_RATIO > g * n * (b.shape[1] // 2):
        a = cols_t[:, slots, :].transpose(0, 2, 1)
        dense, saturated = _dense_pair_sums(a, b)
        acc[...] = dense
        return saturated, int(gi.size)
    order = np.argsort(gi * n + ni, kind="stable")
    gi, ni, ji = gi[order], ni[order], ji[order]
    saturated = 0
    block = max(1, _BLOCK_ELEMENTS // m)
    for start in range(0, gi.size, block):
        sl = slice(start, start + block)
        saturated += _correct_rows(cols_t, slots, b, (gi[sl], ni[sl], ji[sl]), acc)
    return saturated, int(gi.size)


def _correct_rows(
    cols_t: np.ndarray, slots: np.ndarray, b: np.ndarray, pairs: tuple, acc: np.ndarray
) -> int:
    """``_correct_block`` on row-major operands: add ``sat16(p) - p`` into ``acc[g, m, n]``."""
    gi, ni, ji = pairs
    k0 = 2 * ji
    # (R, M) pair sums, each row gathered as one contiguous row of cols_t; int32 holds them.
    p = cols_t[gi, slots[k0]] * b[gi, k0, ni].astype(np.int32)[:, None]
    p += cols_t[gi, slots[k0 + 1]] * b[gi, k0 + 1, ni].astype(np.int32)[:, None]
    np.clip(p, S16_MIN, S16_MAX, out=(delta := np.empty_like(p)))
    delta -= p  # sat16(p) - p: nonzero exactly where the pair saturates
    flat = np.flatnonzero(delta)  # one pass finds and counts the saturated pair sums
    count = int(flat.size)
    if count == 0:
        return 0
    if count * 16 < delta.size:
        ri, mi = np.divmod(flat, delta.shape[1])
        np.add.at(acc, (gi[ri], mi, ni[ri]), delta.reshape(-1)[flat].astype(acc.dtype))
        return count
    column = gi * b.shape[2] + ni  # sorted: equal columns are consecutive, runs distinct
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    sums = np.add.reduceat(delta, starts, axis=0).astype(acc.dtype)
    acc[gi[starts], :, ni[starts]] += sums
    return count
