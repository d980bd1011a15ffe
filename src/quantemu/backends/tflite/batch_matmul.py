"""BATCH_MATMUL on int8: the product of two activations (attention's ``q @ k^T``, ``p @ v``).

Formula: with ``a' = adj_x ? a^T : a`` and ``b' = adj_y ? b^T : b`` (last two axes), batch axes
broadcast (each pair equal or one of them 1, ranks 2..5):
``acc[..., i, j] = sum_k (a'[..., i, k] - z_a) * (b'[..., k, j] - z_b)``, then
``y = clamp(MBQM(acc, m, shift) + z_out, -128, 127)``; one ``(m, shift)`` per tensor from
``QuantizeMultiplier(double(float(s_a * s_b)) / s_out)`` (``GetQuantizedConvolutionMultipler``).
There is no bias and no fused activation.

Policy: the sums are exact (:func:`~quantemu.intmath.matmul_exact`: BLAS float64 or int64 when
its bound proves it); TFLite accumulates in int32, which cannot overflow for
``K * 255 * 255 < 2**31`` (K < 33,025); a larger exact sum is refused by the output stage
rather than wrapped (C's overflow is undefined). The requantizing multiply rounds twice
(``MultiplyByQuantizedMultiplier``) in both runtimes: LiteRT's BUILTIN_REF and TFLite-Micro
agree on every recorded output (``tests/data/batch_matmul``), unlike FULLY_CONNECTED.
LiteRT's BUILTIN (optimized, ruy) resolver differs from both by one code on a few outputs of
a broadcast case; it is not what is emulated.

Mirrors: ``reference_ops::BatchMatMul<int8_t, int32_t>`` (``reference/batch_matmul.h``) as
LiteRT's ``batch_matmul.cc`` (kReference) and TFLite-Micro's ``micro/kernels/batch_matmul.cc``
call it (RHS first, with ``input_offset = -z_a`` and ``weights_offset = -z_b``; the transposes
and TFLite-Micro's batch flattening only move data). XMOS's runtime and xcore-opt 1.4.2
register no BATCH_MATMUL kernel (``Didn't find op for builtin opcode 'BATCH_MATMUL'``).

Counters: ``output_saturated`` (outputs clamped at an int8 rail).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.multiplier import quantize_multiplier
from quantemu.backends.tflite.output import requantize_clamp
from quantemu.backends.tflite.params import MultiplierRounding, two_input_quantization
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import matmul_exact
from quantemu.intmath.reference import multiply_by_quantized_multiplier_double_rounding as mbqm

__all__ = [
    "BatchMatMulParams",
    "batch_matmul_int8",
    "batch_matmul_params",
    "batch_matmul_reference",
]

OFFSET_CODE_MAX = 255  # |q - z| for an int8 code and an int8 zero point
INT32_MAX = 2**31 - 1
MAX_RANK = 5


@dataclass(frozen=True)
class BatchMatMulParams:
    """What BATCH_MATMUL's Prepare stores: offsets, one multiplier, the int8 output range."""

    lhs_offset: int  # -z_a
    rhs_offset: int  # -z_b
    output_offset: int  # z_out
    multiplier: int
    shift: int


def batch_matmul_params(s_a, z_a, s_b, z_b, s_out, z_out) -> BatchMatMulParams:  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    """BATCH_MATMUL's Prepare: ``QuantizeMultiplier(double(f32(s_a) * f32(s_b)) / s_out)``.

    The product of the two scales is a float32 multiply (``GetQuantizedConvolutionMultipler``
    reads both as the lhs "input" and rhs "filter"); the division is in double. Both runtimes
    run the same Prepare.

    >>> p = batch_matmul_params(0.5, 3, 0.25, -2, 0.5, 1)
    >>> (p.lhs_offset, p.rhs_offset, p.output_offset, p.multiplier, p.shift)
    (-3, 2, 1, 1073741824, -1)
    """
    q = two_input_quantization(
        s_a, z_a, s_b, z_b, s_out, z_out, "batch_matmul_params", inputs=("_a", "_b")
    )
    m, shift = quantize_multiplier(float(np.float32(q.s1) * np.float32(q.s2)) / q.s_out)
    return BatchMatMulParams(
        lhs_offset=q.input1_offset,
        rhs_offset=q.input2_offset,
        output_offset=q.output_offset,
        multiplier=m,
        shift=shift,
    )


def _codes(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -128 or arr.max() > 127)):
        raise InvalidInputError(
            f"tflite batch_matmul: {name} must hold int8 codes, got {arr.dtype}"
        )
    if not 2 <= arr.ndim <= MAX_RANK:
        raise UnsupportedError(
            f"tflite batch_matmul: {name} has rank {arr.ndim} {arr.shape}; BATCH_MATMUL takes "
            f"ranks 2 to {MAX_RANK}"
        )
    return arr


def _operands(a, b, adj_x: bool, adj_y: bool) -> tuple[np.ndarray, np.ndarray]:
    """Both operands as ``(..., M, K)`` and ``(..., K, N)`` views, shapes checked."""
    a, b = _codes(a, "a"), _codes(b, "b")
    a = np.swapaxes(a, -1, -2) if adj_x else a
    b = np.swapaxes(b, -1, -2) if adj_y else b
    if a.shape[-1] != b.shape[-2]:
        raise InvalidInputError(
            f"tflite batch_matmul: a {a.shape} and b {b.shape} (after adj_x={adj_x}, "
            f"adj_y={adj_y}) differ in the reduced dimension"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise InvalidInputError(
            f"tflite batch_matmul: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
            "broadcast (each pair must be equal or contain a 1)"
        ) from None
    return a, b


def batch_matmul_int8(a, b, params: BatchMatMulParams, *, adj_x=False, adj_y=False):
    """int8 BATCH_MATMUL of codes ``a`` and ``b``: ``(y, counters)`` (formula in the module).

    >>> p = batch_matmul_params(0.5, 1, 0.5, 0, 0.25, 0)
    >>> a = np.array([[[1, 3], [2, 1]]], np.int8)  # a - 1 = [[0, 2], [1, 0]]
    >>> b = np.array([[[1, -2], [1, 1]]], np.int8)
    >>> y, c = batch_matmul_int8(a, b, p)  # (a - 1) @ b = [[2, 2], [1, -2]], times 1
    >>> y.tolist(), c
    ([[[2, 2], [1, -2]]], {'output_saturated': 0, 'activation_clamped': 0})
    """
    a, b = _operands(a, b, adj_x, adj_y)
    ao = a.astype(np.int16) + np.int16(params.lhs_offset)
    bo = b.astype(np.int16) + np.int16(params.rhs_offset)
    acc = np.asarray(matmul_exact(ao, bo, a_max=OFFSET_CODE_MAX, b_max=OFFSET_CODE_MAX))
    if acc.size and int(np.abs(acc).max()) > INT32_MAX:
        raise UnsupportedError(
            f"tflite batch_matmul: a sum of {a.shape[-1]} products leaves TFLite's int32 "
            "accumulator (undefined in C); shorten the reduced dimension"
        )
    return requantize_clamp(
        acc,
        params.multiplier,
        params.shift,
        params.output_offset,
        rounding=MultiplierRounding.DOUBLE,
    )


def batch_matmul_reference(a, b, params: BatchMatMulParams, *, adj_x=False, adj_y=False):
    """The scalar twin of :func:`batch_matmul_int8`: TFLite's loop nest over the 5-D extended
    shapes (a size-1 batch axis is re-read, not advanced), one Python-int sum per output.

    >>> p = batch_matmul_params(1.0, 0, 1.0, 0, 1.0, 0)
    >>> batch_matmul_reference([[[1, 2]]], [[[3], [4]]], p).tolist()
    [[[11]]]
    """
    a, b = np.asarray(a), np.asarray(b)
    a, b = _operands(a, b, adj_x, adj_y)
    rank = max(a.ndim, b.ndim)
    a5 = a.reshape((1,) * (MAX_RANK - a.ndim) + a.shape)
    b5 = b.reshape((1,) * (MAX_RANK - b.ndim) + b.shape)
    batch = tuple(max(da, db) for da, db in zip(a5.shape[:3], b5.shape[:3], strict=True))
    m, k_depth, n = a5.shape[3], a5.shape[4], b5.shape[4]
    out = np.zeros((*batch, m, n), np.int8)
    for idx in itertools.product(*(range(d) for d in batch)):
        ia = tuple(i if d > 1 else 0 for i, d in zip(idx, a5.shape[:3], strict=True))
        ib = tuple(i if d > 1 else 0 for i, d in zip(idx, b5.shape[:3], strict=True))
        for i in range(m):
            for j in range(n):
                total = 0
                for k in range(k_depth):
                    lhs = int(a5[(*ia, i, k)]) + params.lhs_offset
                    rhs = int(b5[(*ib, k, j)]) + params.rhs_offset
                    total += lhs * rhs
                raw = mbqm(total, params.multiplier, params.shift) + params.output_offset
                out[(*idx, i, j)] = min(max(raw, -128), 127)
    return out.reshape(out.shape[MAX_RANK - rank :])
