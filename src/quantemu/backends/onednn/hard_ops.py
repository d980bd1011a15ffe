"""PyTorch 2.13's ``quantized::hardswish``, ``quantized::hardsigmoid`` and ``quantized::mul`` of
two activations: the ATen kernels the x86 FX flow puts in MobileNetV3 (``nn.Hardswish``, the
squeeze-excite gate ``nn.Hardsigmoid`` and the gate product ``x * gate``).

What they compute: ``hardswish(x) = x·min(max(x + 3, 0), 6)/6`` and ``hardsigmoid(x) =
min(max(x + 3, 0), 6)/6`` of the dequantized codes, requantized to the output qparams (hardswish:
the observed ones; hardsigmoid: fixed ``(1/256, 0)``); ``mul``: the product of two quint8 tensors
(NumPy broadcasting), requantized to its own observed qparams.

The arithmetic (``⊗ ⊕ ⊘`` one binary32 rounding each, ``fma`` one rounding, ``rr(s) = f32(1/s)``):

- hardswish / hardsigmoid, vector body (``qVec::dequantize``, then ``at::vec``):
  ``x = fma(s, f32(q), f32(s ⊗ −z))``, ``t = min(max(x ⊕ 3, 0), 6)``, ``y = (x ⊗ t) ⊘ 6``
  (hardsigmoid ``y = t ⊘ 6``), codes ``clamp(rne(y ⊗ inv) + z_out)``; scalar tail
  (``dequantize_val`` / ``quantize_val``): ``x = s ⊗ f32(q − z)``, the same ``t``/``y``, codes
  ``clamp(rne(f32(z_out) ⊕ y ⊗ inv))``. ``inv = f32(1 / s_out)`` (binary64 quotient for hardswish,
  exactly 256 for hardsigmoid). No step has a multiply feeding an add that GCC could contract.
- mul (integer path of ``qmul_kernel``, body and tail alike): ``c = (a − z_a)·(b − z_b)`` exact in
  int32, ``m = (s_a ⊗ s_b) ⊗ rr(s_out)``, codes ``clamp(rne(f32(c) ⊗ m) + z_out)``
  (``requantize_from_int``: ``f32(c)`` exact, ``|c| <= 65025``).

Vector body and scalar tail: the loop walks each tensor in memory order (channels-last for 4-D
tensors, as quantized convolutions produce them) in blocks of ``VECTOR_CODES`` codes (an
iteration of ``cpu_kernel_vec``'s loop: two ``Vectorized<quint8>`` of 32 codes, the AVX2 build,
which ``REGISTER_DISPATCH`` also gives AVX-512 hosts) over ranges split between threads
(grain 32768, as :func:`..aten.add_scalar_positions`); the rest of each range is the scalar tail.
The mul's body and tail agree, so its broadcasting layout does not matter.

Evidence: bit for bit against ``torch.ops.quantized.hardswish`` / ``torch.nn.functional.
hardsigmoid`` / ``torch.ops.quantized.mul`` of ``torch==2.13.0+cpu`` (ATen capability ``AVX512``,
and ``ATEN_CPU_CAPABILITY=avx2`` alike) on random codes, qparams and shapes, and on codes where
the body and the tail disagree (``tests/backends/onednn/test_onednn_mobilenet_ops.py``).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.aten import add_scalar_positions, fma_f32
from quantemu.backends.onednn.f32 import f32, rr
from quantemu.errors import InvalidInputError

#: Codes per iteration of the vectorised loop (AVX2 build: 2 x 32 quint8).
VECTOR_CODES = 64
#: Fixed output qparams of ``quantized::hardsigmoid`` on quint8.
HARDSIGMOID_QPARAMS = (0.00390625, 0)

_THREE, _SIX, _ZERO = np.float32(3), np.float32(6), np.float32(0)


def _check_codes(name: str, *arrays: np.ndarray) -> None:
    for q in arrays:
        if q.dtype != np.uint8:
            raise InvalidInputError(f"{name}: expected uint8 codes, got {q.dtype} {q.shape}")


def _dequant_tables(scale: float, zero_point: int) -> tuple[np.ndarray, np.ndarray]:
    """``(vector, scalar)`` dequantized values of the 256 codes: ``fma(s, q, s ⊗ −z)`` and
    ``s ⊗ f32(q − z)``."""
    s, codes = f32(scale), np.arange(256)
    vector = fma_f32(s, codes.astype(np.float32), s * f32(-zero_point))
    scalar = s * (codes - zero_point).astype(np.float32)
    return vector, scalar


def scalar_positions(shape: tuple[int, ...], threads: int, channels_last: bool) -> np.ndarray:
    """Flat C-order indices of the elements the loop computes in its scalar tails: memory order
    channels-last for a 4-D ``channels_last`` tensor, else the C order itself."""
    if channels_last:
        return add_scalar_positions(shape, threads, block=VECTOR_CODES)
    return add_scalar_positions((int(np.prod(shape)),), threads, block=VECTOR_CODES)


def _unary(q, x_qparams, y_qparams, *, fn, inv, layout) -> tuple[np.ndarray, int]:
    """A dequantize / ``fn`` / quantize kernel as a 256-entry table per path, then the tails."""
    (xs, xz), (_, yz) = x_qparams, y_qparams
    vector, scalar = (fn(t) for t in _dequant_tables(xs, int(xz)))
    with np.errstate(over="ignore", invalid="ignore"):
        body = np.rint(vector * inv).astype(np.float64) + int(yz)
        tail = np.rint(f32(yz) + scalar * inv).astype(np.float64)
    r = body[q]
    threads, channels_last = layout
    tails = scalar_positions(q.shape, threads, channels_last and q.ndim == 4)
    r.flat[tails] = tail[q.flat[tails]]
    saturated = int(np.count_nonzero((r < 0) | (r > 255)))
    return np.clip(r, 0, 255).astype(np.uint8), saturated


def _hardsigmoid_f32(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x + _THREE, _ZERO), _SIX) / _SIX


def _hardswish_f32(x: np.ndarray) -> np.ndarray:
    return (x * np.minimum(np.maximum(x + _THREE, _ZERO), _SIX)) / _SIX


def quantized_hardswish(
    q: np.ndarray,
    *,
    x_qparams: tuple[float, int],
    y_qparams: tuple[float, int],
    threads: int = 1,
    channels_last: bool = True,
) -> tuple[np.ndarray, int]:
    """``(y, saturated)``: ``quantized::hardswish`` codes of ``q`` (uint8) and how many were
    clamped to ``[0, 255]``. ``threads`` (PyTorch's intra-op threads) and ``channels_last`` (the
    memory order of a 4-D tensor, as a quantized convolution leaves it) move the scalar tails."""
    q = np.asarray(q)
    _check_codes("quantized_hardswish", q)
    inv = f32(1.0 / float(f32(y_qparams[0])))
    layout = (threads, channels_last)
    return _unary(q, x_qparams, y_qparams, fn=_hardswish_f32, inv=inv, layout=layout)


def quantized_hardsigmoid(
    q: np.ndarray,
    *,
    x_qparams: tuple[float, int],
    threads: int = 1,
    channels_last: bool = True,
) -> tuple[np.ndarray, int]:
    """``(y, saturated)``: ``quantized::hardsigmoid`` codes of ``q`` (uint8), output qparams
    :data:`HARDSIGMOID_QPARAMS`; ``threads``, ``channels_last`` as for hardswish."""
    q = np.asarray(q)
    _check_codes("quantized_hardsigmoid", q)
    inv = rr(f32(HARDSIGMOID_QPARAMS[0]))
    layout = (threads, channels_last)
    return _unary(q, x_qparams, HARDSIGMOID_QPARAMS, fn=_hardsigmoid_f32, inv=inv, layout=layout)


def quantized_mul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    a_qparams: tuple[float, int],
    b_qparams: tuple[float, int],
    y_qparams: tuple[float, int],
) -> tuple[np.ndarray, int]:
    """``(y, saturated)``: ``quantized::mul(a, b, s_out, z_out)`` codes of two uint8 tensors
    (NumPy broadcasting) and how many were clamped to ``[0, 255]``."""
    a, b = np.asarray(a), np.asarray(b)
    _check_codes("quantized_mul", a, b)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidInputError(
            f"quantized_mul: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None
    (sa, za), (sb, zb), (so, zo) = a_qparams, b_qparams, y_qparams
    m = (f32(sa) * f32(sb)) * rr(f32(so))
    # One table of the 256 x 256 code pairs: c is exact in float32 (|c| <= 65025).
    c = np.multiply.outer(np.arange(256) - int(za), np.arange(256) - int(zb))
    with np.errstate(over="ignore", invalid="ignore"):
        table = np.rint(c.astype(np.float32) * m).astype(np.float64) + int(zo)
    r = table[np.broadcast_to(a, shape), np.broadcast_to(b, shape)]
    saturated = int(np.count_nonzero((r < 0) | (r > 255)))
    return np.clip(r, 0, 255).astype(np.uint8), saturated


__all__ = [
    "HARDSIGMOID_QPARAMS",
    "VECTOR_CODES",
    "quantized_hardsigmoid",
    "quantized_hardswish",
    "quantized_mul",
]
