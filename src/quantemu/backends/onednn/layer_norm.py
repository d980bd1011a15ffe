"""PyTorch 2.13's ``quantized::layer_norm`` (ATen ``quantized_normalize_kernel``) on quint8 rows.

What it computes: ``torch.ao.nn.quantized.LayerNorm`` over the last axis, the module PyTorch's
x86 FX flow puts in place of ``nn.LayerNorm``: quint8 codes in, quint8 codes out, per-element
float32 ``gamma``/``beta``. Each row of ``N`` codes is normalized on its own (``parallel_for``
over rows changes nothing).

The arithmetic, in binary32 unless marked (``⊗ ⊕ ⊘`` one rounding each, ``fma`` one rounding),
with ``s``/``ss`` the exact sums of the codes and of their squares (``hsum``, ``hsum_sq``):
``m = f32(s) ⊘ f32(N)``, ``mean = m ⊖ f32(zp_x)``, ``var = max(fma(−m, m, f32(ss) ⊘ f32(N)), 0)``,
``k = f32(f64(s_x) / sqrt(f64((var ⊗ s_x) ⊗ s_x) + eps))`` (binary64 ``eps``, ``sqrt`` and
division), then per element ``t = (f32(q − zp_x) ⊖ mean) ⊗ k`` and ``v = fma(t, gamma, beta)``.

Vector body and scalar tail: the kernel is registered with ``REGISTER_DISPATCH`` only, so an
AVX-512 host runs the AVX2 build (GCC 13 ``-O2``, FMA contraction on, hence the two ``fma``
above in both parts). Its vector loop covers ``N // 32 * 32`` codes (one ``Vectorized<quint8>``
= 4 vectors of 8 floats) and quantizes with ``clamp(rne(v ⊗ rr(s_y)) + zp_y)``; the last
``N % 32`` codes go through ``quantize_val``: ``clamp(rne(f32(zp_y) ⊕ v ⊗ rr(s_y)))``. Every
``isa`` the backend offers (AVX2 and up) runs this same code, so the result does not depend on it.

Evidence: bit for bit against ``torch.ops.quantized.layer_norm`` of ``torch==2.13.0+cpu`` with
ATen capability ``AVX512`` and ``ATEN_CPU_CAPABILITY=avx2``
(``tests/backends/onednn/test_onednn_layer_norm.py``); the ``fma`` steps were each told apart
from ``⊗ ⊕`` on rows where the two differ, the two quantizers on exact and near ties.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.aten import fma_f32
from quantemu.backends.onednn.f32 import f32, rr
from quantemu.errors import InvalidInputError

#: Codes per iteration of the kernel's vector loop (AVX2 build: 4 x 8 floats).
VECTOR_CODES = 32
#: Longest row: ``f32(N)`` stays exact and the int32 lanes of ``hsum`` cannot overflow.
MAX_ROW = 1 << 24


def quantized_layer_norm(
    q: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray,
    *,
    x_qparams: tuple[float, int],
    y_qparams: tuple[float, int],
    eps: float,
) -> tuple[np.ndarray, int]:
    """``(y, saturated)``: the uint8 codes of ``quantized::layer_norm`` over the last axis of
    ``q`` (uint8), and how many of them were clamped to ``[0, 255]``.

    ``gamma``, ``beta``: float32, broadcastable to ``(N,)``; ``x_qparams``/``y_qparams``: the
    ``(scale, zero_point)`` of input and output (scales read as binary32, as the kernel reads
    them); ``eps`` as the binary64 PyTorch holds.
    """
    q = np.asarray(q)
    if q.dtype != np.uint8 or q.ndim == 0 or not 0 < q.shape[-1] <= MAX_ROW:
        raise InvalidInputError(
            f"quantized_layer_norm: expected uint8 codes with 1..{MAX_ROW} elements on the last "
            f"axis, got {q.dtype} of shape {q.shape}"
        )
    n = q.shape[-1]
    rows = q.reshape(-1, n)
    (x_scale, x_zero_point), (y_scale, y_zero_point) = x_qparams, y_qparams
    t = _normalized(rows, f32(x_scale), int(x_zero_point), float(eps))
    with np.errstate(over="ignore", invalid="ignore"):
        v = fma_f32(t, _per_element(gamma, n), _per_element(beta, n))
        p = v * rr(f32(y_scale))
        body = n // VECTOR_CODES * VECTOR_CODES
        r = np.empty(rows.shape, np.float64)
        r[:, :body] = np.rint(_nan_high(p[:, :body])) + int(y_zero_point)
        r[:, body:] = np.rint(_nan_high(f32(y_zero_point) + p[:, body:]))
    saturated = int(np.count_nonzero((r < 0) | (r > 255)))
    return np.clip(r, 0, 255).astype(np.uint8).reshape(q.shape), saturated


def _normalized(rows: np.ndarray, xs: np.float32, zp: int, eps: float) -> np.ndarray:
    """``t = (f32(q − zp) ⊖ mean) ⊗ k`` of every code, float32 ``(M, N)``."""
    n = rows.shape[1]
    wide = rows.astype(np.int64)
    nf = f32(n)
    m = f32(wide.sum(axis=1)) / nf
    mean = m - f32(zp)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        var = np.maximum(fma_f32(-m, m, f32((wide * wide).sum(axis=1)) / nf), f32(0))
        k = f32(np.float64(xs) / np.sqrt(((var * xs) * xs).astype(np.float64) + eps))
        dq = f32(wide - zp)  # |q - zp| <= 255: exact
        return (dq - mean[:, None]) * k[:, None]


def _per_element(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` as float32 of shape ``(N,)`` (a scalar or size-1 array is repeated)."""
    arr = np.asarray(values, dtype=np.float32)
    try:
        return np.broadcast_to(arr.reshape(-1) if arr.size == n else arr, (n,))
    except ValueError:
        raise InvalidInputError(
            f"quantized_layer_norm: gamma/beta of shape {arr.shape} do not broadcast to ({n},)"
        ) from None


def _nan_high(v: np.ndarray) -> np.ndarray:
    """NaN as +inf: ``minps`` against the int32 bound keeps the bound, which saturates high."""
    return np.where(np.isnan(v), np.float32(np.inf), v)
