"""The 32-bit accumulation of every XS3 operator, exact and order-faithful where it matters.

Each operator seeds the accumulator with the channel's bias and adds int8 products; what differs
is *when* the accumulator saturates (at +-(2^31 - 1), symmetric) or wraps (``xs3.md`` section 6):

- ``STEPWISE``: clamp after every step; a step is a chunk of consecutive products inside one
  kernel tap (VLMACCR: 32 bytes; the host conv2d_1x1: one product; shallowin: one kernel row);
- ``AT_END``: clamp the exact sum once (host fully_connected);
- ``WRAP``: plain int32 addition (host depthwise);
- ``WRAP_THEN_LIFT``: per chunk, wrap in int32 and lift -2^31 to -(2^31 - 1) (host legacy fc).

How it stays fast (DESIGN principle 8). One exact GEMM
(:func:`quantemu.intmath.matmul_exact`, which proves its float type from the operands' bound)
gives every exact sum: int8 products are at most 2^14 in magnitude, so with ``n`` products per
output every partial sum is at most ``n * 2^14``. A channel whose
``|bias| + max|x| * sum|w| <= 2^31 - 1`` cannot reach a rail in any order, so its exact sum is
the answer. Only the other channels pay for the step sums in the exact order, which
:func:`quantemu.intmath.accumulate_count` then clamps.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from quantemu.errors import UnsupportedError
from quantemu.intmath import (
    Bounds,
    Granularity,
    accumulate_count,
    matmul_exact,
    saturate_symmetric,
    wrap,
)

INT32_MAX = 2**31 - 1
PRODUCT_MAX = 2**14  # |int8 * int8| <= 128 * 128
_BLOCK_ELEMENTS = 1 << 21  # step sums held at once on the saturating path (16 MiB of int64)


class Saturation(enum.Enum):
    """When the 32-bit accumulator saturates or wraps (see the module docstring)."""

    STEPWISE = "stepwise"
    AT_END = "at_end"
    WRAP = "wrap"
    WRAP_THEN_LIFT = "wrap_then_lift"


@dataclass(frozen=True)
class Steps:
    """How a kernel row's products group into saturation steps.

    ``tap_len`` consecutive elements form one tap (C_in for deep/1x1/fc; a whole kernel row for
    shallowin); each tap splits into chunks of ``chunk`` elements, the last one shorter. Chunks
    never straddle taps: lib_nn issues one VLMACCR per 32 channels of one input pixel.
    """

    tap_len: int
    chunk: int


def gemm_dtype(n: int):
    """The float type in which an ``n``-term int8 dot product is exact (see module docstring)."""
    if n * PRODUCT_MAX <= 2**24:
        return np.float32
    if n * PRODUCT_MAX < 2**53:
        return np.float64
    raise UnsupportedError(
        f"a dot product of {n} int8 terms could exceed 2^53 and is not computed exactly here; "
        "split the layer"
    )


FLOAT32_TERMS = 2**24 // PRODUCT_MAX  # 1024: the longest int8 dot product exact in float32

# The exact GEMM (its proof and its float32 runs for long dot products) is intmath's.
exact_gemm = matmul_exact


def risky_channels(weights: np.ndarray, bias: np.ndarray, xmax: int) -> np.ndarray:
    """Channels whose running sum could reach +-(2^31 - 1): ``|bias| + xmax*sum|w| > rail``.

    ``weights`` is ``(C, n)``; ``sum|w| <= n * 128`` so the bound is exact in int64.
    """
    # |w| <= 128 fits int16 (a quarter of int64's memory traffic); the sum is taken in int64.
    w_abs = np.abs(weights.astype(np.int16)).sum(axis=1, dtype=np.int64)
    return np.abs(bias) + xmax * w_abs > INT32_MAX


def _step_sums(patches: np.ndarray, weights: np.ndarray, steps: Steps, xmax: int) -> np.ndarray:
    """``(p, S, R, steps_per_row)`` int64 sums of each step, in natural order within a row.

    ``patches`` is ``(p, R, L)`` and ``weights`` ``(S, R, L)`` with ``L`` a multiple of
    ``tap_len``. Taps are zero-padded to whole chunks (zeros add nothing) and each step is one
    batch of a batched GEMM: ``(steps, p, chunk) @ (steps, chunk, S)``.
    """
    p, r, length = patches.shape
    s = weights.shape[0]
    taps = r * (length // steps.tap_len)
    n_chunks = -(-steps.tap_len // steps.chunk)
    pad = n_chunks * steps.chunk - steps.tap_len

    def split(arr, lead):
        arr = arr.reshape(lead, taps, steps.tap_len)
        if pad:
            arr = np.pad(arr, ((0, 0), (0, 0), (0, pad)))
        return arr.reshape(lead, taps * n_chunks, steps.chunk).transpose(1, 0, 2)

    # Contiguous batches let the batched GEMM run through BLAS.
    a = np.ascontiguousarray(split(patches, p))  # (steps, p, chunk)
    b = np.ascontiguousarray(split(weights, s).transpose(0, 2, 1))  # (steps, chunk, S)
    sums = matmul_exact(a, b, a_max=xmax)  # (steps, p, S)
    return sums.transpose(1, 2, 0).reshape(p, s, r, -1)


def _wrap_then_lift(step_sums: np.ndarray, init: np.ndarray):
    """Host legacy fc: ``acc = max(WRAP32(acc + s), -(2^31 - 1))`` per chunk.

    This loops over the chunks of C_in (C_in/32 steps, each vectorised over every output): the
    wrap-then-lift map does not compose associatively, and there are only a handful of steps.
    """
    acc = np.broadcast_to(init, step_sums.shape[:-1]).astype(np.int64)
    changed = np.zeros(acc.shape, dtype=bool)
    for j in range(step_sums.shape[-1]):
        exact = acc + step_sums[..., j]  # |acc| <= 2^31, |s| <= 32 * 2^14: fits int64
        acc = np.maximum(wrap(exact, 32), -INT32_MAX)
        changed |= acc != exact
    return acc, changed


def _ordered_accumulate(sums, bias_s, row_order, mode):
    """Clamp (or wrap-then-lift) the step sums ``(p, S, R, k)`` in the operator's order."""
    if row_order is not None:
        sums = np.take_along_axis(sums, row_order[:, None, :, None], axis=2)
    sums = sums.reshape(sums.shape[0], sums.shape[1], -1)
    if mode is Saturation.WRAP_THEN_LIFT:
        return _wrap_then_lift(sums, bias_s)
    return accumulate_count(
        sums, bits=32, granularity=Granularity.PER_PRODUCT, init=bias_s, bounds=Bounds.SYMMETRIC
    )


def accumulate_conv(
    patches: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    *,
    mode: Saturation,
    steps: Steps | None = None,
    row_order: np.ndarray | None = None,
    xmax: int = 128,
):
    """Exact 32-bit accumulators ``(P, C)`` of ``bias + patches . weights`` under ``mode``.

    ``patches``: ``(P, R, L)`` integer-valued (any int or float dtype) input windows, ``R`` kernel
    rows of ``L`` elements; ``weights``: ``(C, R, L)`` int8; ``bias``: ``(C,)`` int64;
    ``row_order``: ``(P, R)`` kernel-row visiting order per pixel (``None``: ascending);
    ``xmax``: a bound on ``|x|`` over the patches. Returns ``(acc, saturated, wrapped)``, the
    last two bool ``(P, C)`` masks.
    """
    n_pix, r, length = patches.shape
    c = weights.shape[0]
    w2 = weights.reshape(c, r * length)
    # |bias| <= 2^31 and |total| <= n * 2^14 < 2^53: the sum fits int64.
    exact = bias + matmul_exact(patches.reshape(n_pix, r * length), w2.T, a_max=xmax)
    none = np.zeros(exact.shape, dtype=bool)
    if mode is Saturation.AT_END:
        acc = saturate_symmetric(exact, 32)
        return acc, acc != exact, none
    if mode is Saturation.WRAP:
        acc = wrap(exact, 32)
        return acc, none, acc != exact
    risky = np.flatnonzero(risky_channels(w2, bias, xmax))
    flags = np.zeros(exact.shape, dtype=bool)
    if risky.size:
        w_s = weights[risky]
        per_pixel = risky.size * r * (length // steps.chunk + length // steps.tap_len)
        block = max(1, _BLOCK_ELEMENTS // per_pixel)
        # Blocks of pixels bound the memory of the step sums; each block is fully vectorised.
        for start in range(0, n_pix, block):
            sl = slice(start, start + block)
            sums = _step_sums(patches[sl], w_s, steps, xmax)
            order = None if row_order is None else row_order[sl]
            acc_s, flag_s = _ordered_accumulate(sums, bias[risky], order, mode)
            exact[sl, risky] = acc_s
            flags[sl, risky] = flag_s
    if mode is Saturation.WRAP_THEN_LIFT:
        return exact, none, flags
    return exact, flags, none


def accumulate_depthwise(
    patches: np.ndarray, weights: np.ndarray, bias: np.ndarray, *, mode: Saturation, xmax: int
):
    """Depthwise accumulators ``(P, C)``: channel ``c`` uses only input channel ``c``.

    ``patches``: ``(P, T, C)`` int8 windows (``T = K_h*K_w`` taps, row-major); ``weights``:
    ``(T, C)``. ``WRAP`` (host): plain int32 sum. ``STEPWISE`` (device, VLMACC): clamp after
    every product, taps in row-major order. Returns ``(acc, saturated, wrapped)``.
    """
    n_pix, taps, c = patches.shape
    w64 = weights.astype(np.int64)
    if taps <= FLOAT32_TERMS:
        # Per-channel dot products over the taps in float32: every partial sum is an integer
        # of magnitude <= T * 2^14 <= 2^24, exact whatever order einsum adds in.
        f32 = np.float32
        dots = np.einsum("ptc,tc->pc", patches.astype(f32), weights.astype(f32))
        exact = bias + dots.astype(np.int64)  # |.| <= 2^31 + 2^24: fits int64
    else:
        exact = np.broadcast_to(bias, (n_pix, c)).astype(np.int64)
        # A loop over the kernel taps, each step vectorised over every pixel and channel:
        # |partial| <= 2^31 + T*2^14 fits int64.
        for t in range(taps):
            exact += patches[:, t, :] * w64[t]
    none = np.zeros(exact.shape, dtype=bool)
    if mode is Saturation.WRAP:
        acc = wrap(exact, 32)
        return acc, none, acc != exact
    risky = np.flatnonzero(risky_channels(weights.T, bias, xmax))
    flags = np.zeros(exact.shape, dtype=bool)
    if risky.size:
        block = max(1, _BLOCK_ELEMENTS // (risky.size * taps))
        for start in range(0, n_pix, block):  # pixel blocks bound memory (see accumulate_conv)
            sl = slice(start, start + block)
            products = patches[sl][:, :, risky].astype(np.int64) * w64[:, risky]  # (p, T, S)
            acc_s, flag_s = accumulate_count(
                products,
                bits=32,
                granularity=Granularity.PER_PRODUCT,
                init=bias[risky],
                bounds=Bounds.SYMMETRIC,
                axis=1,
            )
            exact[sl, risky] = acc_s
            flags[sl, risky] = flag_s
    return exact, flags, none
