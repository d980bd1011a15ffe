"""``matmul``: raw s32 accumulators of oneDNN's int8 matmul and ``gemm_s8s8s32`` (page §3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.pairsum import exact_matmul, pair_sum_matmul
from quantemu.backends.onednn.params import (
    INT32_MAX,
    INT32_MIN,
    Isa,
    MatmulApi,
    MatmulParams,
    SrcType,
    check_operand,
)
from quantemu.errors import InvalidInputError, UnsupportedError

_SRC_DTYPES = {SrcType.U8: np.uint8, SrcType.S8: np.int8}

# Longest reduction the int64 bookkeeping is proven for: |zp * Σb| <= 2**31 * 128 * K < 2**62.
MAX_REDUCTION = 2**23


@dataclass(frozen=True)
class AccumulatorResult:
    """Raw s32 accumulators (int32) and the number of pair sums that saturated to s16."""

    acc: np.ndarray
    saturated_pairs: int


def matmul(a: np.ndarray, b: np.ndarray, params: MatmulParams) -> AccumulatorResult:
    """``C (M, N)`` int32 of ``A (M, K) · B (K, N)`` as oneDNN 3.12 computes it on ``params.isa``.

    ``A`` is uint8 (``src_dt = u8``) or int8 (``s8``), ``B`` int8. Per page §3:

    - VNNI/AMX: ``Σ_k (a[k] − zp)·b[k]`` exactly;
    - u8 source: ``pair_sum(a, b) − zp·Σb``;
    - s8 source through the +128 shift: ``pair_sum(a + 128, b) − (128 + zp)·Σb``, except the two
      irregularities of oneDNN 3.12: the AVX2 matmul with ``zp != 0`` is exact, and
      ``gemm_s8s8s32`` on ``avx512_core`` with ``N = 1`` puts the +128 on ``B``.

    Pairs run along K: ``(k0, k1), (k2, k3), …``; an odd K pairs its last element with zero.
    """
    _check_operands(a, b, params)
    zp = params.src_zero_point
    a16 = a.astype(np.int16)  # int16 holds u8, s8 and s8 + 128
    b_sum = b.sum(axis=0, dtype=np.int64)  # |Σb| <= 128 * K
    saturated = 0
    if params.isa.exact or (
        params.src_dt is SrcType.S8
        and params.api is MatmulApi.MATMUL
        and params.isa is Isa.AVX2
        and zp != 0
    ):
        c = exact_matmul(a16, b) - zp * b_sum[None, :]
    elif params.src_dt is SrcType.U8:
        c, saturated = _pair_sum(a16, b)
        c -= zp * b_sum[None, :]
    elif params.api is MatmulApi.GEMM and params.isa is Isa.AVX512_CORE and b.shape[1] == 1:
        # B is the unsigned side: (B + 128) paired with A, compensation -128·Σ_k A[m, k].
        ct, saturated = _pair_sum(b.astype(np.int16).T + 128, a16.T)
        c = ct.T - 128 * a16.sum(axis=1, dtype=np.int64, keepdims=True)
    else:
        c, saturated = _pair_sum(a16 + 128, b)
        c -= (128 + zp) * b_sum[None, :]
    return AccumulatorResult(to_int32(c, "matmul"), saturated)


def _pair_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """pair_sum of every row of ``a (M, K)`` with every column of ``b (K, N)``, K zero-padded."""
    if a.shape[1] % 2:
        a = np.pad(a, ((0, 0), (0, 1)))
        b = np.pad(b, ((0, 1), (0, 0)))
    result = pair_sum_matmul(a[None], b[None])
    return result.acc[0], result.saturated_pairs


def to_int32(c: np.ndarray, where: str) -> np.ndarray:
    """``c`` as int32; an s32 overflow is not pinned down by the page, so it is refused."""
    if c.size and (c.min() < INT32_MIN or c.max() > INT32_MAX):
        raise UnsupportedError(
            f"{where}: an accumulator ({int(c.min())} … {int(c.max())}) leaves s32; what oneDNN "
            "does then is not pinned down (page §2: no case comes near s32 overflow)"
        )
    return c.astype(np.int32)


def _check_operands(a: np.ndarray, b: np.ndarray, params: MatmulParams) -> None:
    for_src = f" for src_dt = {params.src_dt.value!r}"
    check_operand(a, "matmul: A", _SRC_DTYPES[params.src_dt], 2, note=for_src)
    check_operand(b, "matmul: B", np.int8, 2)
    if a.shape[1] != b.shape[0]:
        raise InvalidInputError(
            f"matmul: A is {a.shape} and B is {b.shape}: A's columns must equal B's rows"
        )
    if a.shape[1] > MAX_REDUCTION:
        raise InvalidInputError(f"matmul: K = {a.shape[1]} > {MAX_REDUCTION} is not supported")
    if params.api is MatmulApi.GEMM and (params.src_dt is SrcType.U8 or params.src_zero_point):
        raise UnsupportedError(
            "matmul api = 'gemm' is dnnl_gemm_s8s8s32 through torch._int_mm: s8 source and zero "
            f"point 0 only (got src_dt = {params.src_dt.value!r}, src_zero_point = "
            f"{params.src_zero_point}); use api = 'matmul'"
        )
