"""PyTorch 2.13's own quantized CPU kernels that run between the oneDNN primitives of a model.

A PyTorch quantized model on the ``onednn`` engine hands only convolution and linear to oneDNN.
Quantizing the input, the residual ``quantized::add``, average pooling and clamps are ATen
kernels computing in binary32, and their arithmetic is not the same on every element: the
vectorised body and the scalar tail of a loop round differently. What they compute, pinned
against ``torch==2.13.0+cpu`` on an AVX-512 host (ATen CPU capability ``AVX512``; the tests in
``tests/backends/onednn/test_onednn_lower.py`` compare bit for bit):

- ``quantize_per_tensor`` (FBGEMM ``Quantize``, legacy form): ``clamp(rne(fma(x, rr(s), z)))``,
  one rounding for the multiply-add, on every element.
- ``quantize_val`` (the scalar helper the kernels' remainder loops call):
  ``clamp(rne(f32(z) ⊕ (x ⊗ rr(s))))``, two roundings, no FMA.
- ``quantized::add``: vector body ``dequant(q) = fma(s, q, f32(s·−z))``, ``c = da ⊕ db``,
  ``clamp(rne(c ⊗ rr(s_out)) + z_out)``; the scalar tail of every loop range dequantizes with
  ``s ⊗ (q − z)`` and quantizes with ``quantize_val``. The loop (TensorIterator) walks the
  elements in memory order (channels-last for the 4-D tensors a quantized convolution produces)
  in blocks of 64, over ranges split between threads (``threads``, grain 32768).
- ``avg_pool2d`` (channels-last kernel): ``acc = Σ q − z_in·n_in``, ``m = f32(s_in ⊘ s_out) ⊘
  f32(divisor)``; channels below ``C // 16 · 16``: ``clamp(rne(f32(acc) ⊗ m) + z_out)``, the
  rest: ``quantize_val(acc, rr(m), z_out)``.
- ``adaptive_avg_pool2d`` to 1x1 (channels-last): the same ``acc`` and ``m``; channels below
  ``C // 8 · 8``: ``clamp(rne(fma(f32(acc), rr(rr(m)), z_out)))``, the rest ``quantize_val``.
"""

from __future__ import annotations

import functools

import numpy as np

from quantemu.backends.onednn.f32 import f32, rr
from quantemu.errors import InvalidInputError
from quantemu.intmath import sliding_windows
from quantemu.program import LinearEncoding

_F64 = np.float64
ADD_BLOCK = 64  # elements per vectorised iteration of the quantized add loop (2 x 32 lanes)
GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE: below it TensorIterator stays on one thread
AVG_POOL_VECTOR_CHANNELS = 16  # channels per vector of the channels-last avg_pool2d kernel
ADAPTIVE_POOL_VECTOR_CHANNELS = 8  # channels per vector of the adaptive avg pool kernel


def fma_f32(a, b, c) -> np.ndarray:
    """``fma(a, b, c)`` in binary32: ``a·b + c`` exactly, rounded once to nearest even.

    ``a·b`` of two binary32 values is exact in binary64 (48 significant bits), and rounding
    ``s = f64(a·b + c)`` to binary32 is already correct unless ``s`` lies exactly on a binary32
    tie (rounding to nearest is monotone and binary32 ties are binary64 values, so the first
    rounding can reach a tie but not cross it) or in binary32's subnormal range, whose ties sit
    elsewhere. Only those elements take the exact path: the sum's error by TwoSum, and rounding
    to odd, which makes the final rounding to binary32 correct (53 >= 24 + 2 bits).

    >>> float(fma_f32(np.float32(1 + 2**-23), np.float32(1 - 2**-23), np.float32(-1)))
    -1.4210854715202004e-14
    """
    a, b, c = (np.asarray(v, dtype=np.float32) for v in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):  # ±inf and NaN pass through as in fma
        p = a.astype(_F64) * b.astype(_F64)
        cc = c.astype(_F64)
        s = p + cc
        low = s.view(np.int64) & _F32_TIE_MASK
        risky = (low == _F32_TIE) | (np.abs(s) < _F32_NORMAL_MARGIN)
        if np.any(risky):
            p, cc = np.broadcast_to(p, s.shape), np.broadcast_to(cc, s.shape)
            s = np.array(s)  # writable (a 0-d result comes back as a scalar otherwise)
            s[risky] = _round_to_odd_sum(p[risky], cc[risky])
        return s.astype(np.float32)


# The 29 binary64 fraction bits below binary32's last one: a binary32 tie has exactly the top one.
_F32_TIE_MASK = (1 << 29) - 1
_F32_TIE = 1 << 28
_F32_NORMAL_MARGIN = 2.0**-125  # below: binary32 subnormals (and their ties) are near


def _round_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``p + c`` in binary64 rounded to odd (TwoSum gives the exact error)."""
    s = p + c
    bp = s - c
    e = (p - bp) + (c - (s - bp))  # s + e == p + c exactly (finite s)
    inexact_even = np.isfinite(s) & (e != 0) & ((s.view(np.int64) & 1) == 0)
    return np.where(inexact_even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _clamp_rne(v: np.ndarray, add: int | np.ndarray = 0) -> np.ndarray:
    """``clamp(rne(v) + add, 0, 255)`` as int64; NaN goes to 255 (``minps`` keeps the bound)."""
    r = np.rint(np.where(np.isnan(v), np.float32(255), v).astype(_F64)) + add
    return np.clip(r, 0, 255).astype(np.int64)


def quantize_per_tensor(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """``torch.quantize_per_tensor(x, scale, zero_point, torch.quint8)`` codes (uint8).

    ``clamp(rne(fma(x, rr(scale), zero_point)), 0, 255)``: FBGEMM's legacy ``Quantize`` with one
    rounding for the fused multiply-add, on the vector body and the (contracted) tail alike.

    >>> quantize_per_tensor(np.array([-1.0, 0.0, 0.5, 1.0, np.inf], np.float32), 0.25, 10).tolist()
    [6, 10, 12, 14, 255]
    """
    v = fma_f32(x, rr(f32(scale)), f32(zero_point))
    return _clamp_rne(v).astype(np.uint8)


def quantize_val(x: np.ndarray, inv_scale: np.float32, zero_point: int) -> np.ndarray:
    """ATen's scalar ``quantize_val``: ``clamp(rne(f32(z) ⊕ (x ⊗ inv_scale)), 0, 255)`` (int64).

    ``inv_scale`` is the binary32 reciprocal the caller formed (``rr(scale)``).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        v = f32(zero_point) + np.asarray(x, dtype=np.float32) * inv_scale
    return _clamp_rne(v)


class TorchU8Encoding(LinearEncoding):
    """A ``quint8`` per-tensor affine tensor; ``target_quantize`` is ``torch.quantize_per_tensor``.

    The codes a model's ``QuantStub`` produces differ from an ideal round-half-even quantizer
    only where ``fma(x, rr(s), z)`` and ``x / s + z`` straddle a rounding boundary (at most one
    LSB, rarely), so the simulation's error measurement barely changes while the entry codes are
    PyTorch's own. ``quantize`` stays the ideal quantizer the LSB error is measured against.
    """

    def __init__(self, scale: float, zero_point: int) -> None:
        super().__init__(float(f32(scale)), int(zero_point), "uint8")

    def target_quantize(self, values: np.ndarray) -> np.ndarray:
        return quantize_per_tensor(np.asarray(values, dtype=np.float32), self.scale, self.zp)

    @property
    def zp(self) -> int:
        """The zero point as an int."""
        return int(self.zero_point)

    def same_params(self, other: object) -> bool:
        """True when ``other`` has the same scale and zero point."""
        return (
            isinstance(other, TorchU8Encoding) and self.scale == other.scale and self.zp == other.zp
        )


def add_scalar_positions(
    shape: tuple[int, ...], threads: int, *, block: int = ADD_BLOCK
) -> np.ndarray:
    """Flat NCHW indices of the elements the quantized add computes in its scalar tail.

    TensorIterator walks the flat memory order (channels-last for 4-D tensors) in ranges: one
    range below ``GRAIN_SIZE`` elements or on one thread, else ``min(threads, ceil(n/grain))``
    ranges of ``ceil(n/ranges)`` elements; each range runs blocks of ``block`` elements
    vectorised and its last ``len % block`` elements in the scalar loop.
    """
    n = int(np.prod(shape))
    ranges = 1 if n < GRAIN_SIZE or threads == 1 else min(threads, -(-n // GRAIN_SIZE))
    chunk = -(-n // ranges)
    tails = [
        np.arange(start + (stop - start) // block * block, stop)
        for start, stop in ((s, min(s + chunk, n)) for s in range(0, n, chunk))
    ]
    memory = np.concatenate(tails)  # positions in memory order
    if len(shape) != 4:
        return memory
    _, c, h, w = shape
    pix, ch = np.divmod(memory, c)  # channels-last: ((n·H + h)·W + w)·C + c
    img, hw = np.divmod(pix, h * w)
    return (img * c + ch) * (h * w) + hw


def quantized_add(
    a: np.ndarray,
    b: np.ndarray,
    encodings: tuple[TorchU8Encoding, TorchU8Encoding, TorchU8Encoding],
    *,
    relu: bool,
    threads: int,
) -> tuple[np.ndarray, int]:
    """``quantized::add`` / ``add_relu`` codes (uint8) and how many outputs saturated.

    Every element first takes the vector body's arithmetic; the scalar tail's few elements are
    then recomputed with theirs.
    """
    if a.shape != b.shape:
        raise InvalidInputError(
            f"quantized add: operand shapes {a.shape} and {b.shape} differ (broadcasting is not "
            "lowered)"
        )
    ea, eb, eo = encodings
    # Every vector-body output is a function of the code pair (a, b) alone: one table lookup.
    table = _add_table((ea.scale, ea.zp, eb.scale, eb.zp, eo.scale, eo.zp), relu)
    idx = a.astype(np.uint16)
    np.left_shift(idx, 8, out=idx)
    np.bitwise_or(idx, b, out=idx)
    y = table[idx]  # C order, like the element-wise form it replaces
    tail = add_scalar_positions(a.shape, threads)
    if tail.size:
        inv = rr(f32(eo.scale))
        with np.errstate(over="ignore", invalid="ignore"):
            # .flat: C-order positions whatever the memory layout (a conv's output is NHWC).
            cs = _dequant_mul(a.flat[tail], ea) + _dequant_mul(b.flat[tail], eb)
            if relu:
                cs = np.maximum(cs, np.float32(0))
            y.flat[tail] = _add_codes(np.rint(f32(eo.zp) + cs * inv))
    saturated = int(np.count_nonzero(y > 255))
    return y.astype(np.uint8), saturated  # the low byte: the code


@functools.lru_cache(maxsize=256)
def _add_table(params: tuple, relu: bool) -> np.ndarray:
    """The vector body of ``quantized::add`` for every code pair, indexed by ``a·256 + b``:
    :func:`_add_codes` of ``rne((dequant(a) ⊕ dequant(b)) ⊗ rr(s_out)) + z_out``.

    ``params``: ``(s_a, z_a, s_b, z_b, s_out, z_out)``."""
    sa, za, sb, zb, so, zo = params
    codes = np.arange(256, dtype=np.uint8)
    da = _dequant_fma(codes, TorchU8Encoding(sa, za))
    db = _dequant_fma(codes, TorchU8Encoding(sb, zb))
    c = da[:, None] + db[None, :]
    if relu:
        np.maximum(c, np.float32(0), out=c)
    with np.errstate(over="ignore", invalid="ignore"):
        c *= rr(f32(so))
        r = np.rint(c) + np.float32(zo)  # exact: integers far below 2**24 (or saturating)
    table = _add_codes(r).reshape(-1)
    table.setflags(write=False)
    return table


def _add_codes(r: np.ndarray) -> np.ndarray:
    """uint16 ``clamp(r, 0, 255)`` (NaN -> 255), plus 256 where ``r`` saturated."""
    y = np.clip(np.nan_to_num(r, nan=255.0), 0, 255).astype(np.uint16)
    y[(r < 0) | (r > 255)] += 256
    return y


def _dequant_fma(q: np.ndarray, e: TorchU8Encoding) -> np.ndarray:
    """Vectorized<quint8>::dequantize: ``fma(s, f32(q), f32(s ⊗ −z))``, by a 256-entry table."""
    s = f32(e.scale)
    table = fma_f32(s, np.arange(256, dtype=np.float32), s * f32(-e.zp))
    return table[q]


def _dequant_mul(q: np.ndarray, e: TorchU8Encoding) -> np.ndarray:
    """ATen's scalar ``dequantize_val``: ``s ⊗ f32(q − z)``, by a 256-entry table."""
    table = f32(e.scale) * (np.arange(256) - e.zp).astype(np.float32)
    return table[q]


def _pool_multiplier(e_in: TorchU8Encoding, e_out: TorchU8Encoding, divisor) -> np.ndarray:
    """``m = f32(s_in ⊘ s_out) ⊘ f32(divisor)`` (binary32 throughout, as the kernels do)."""
    return (f32(e_in.scale) / f32(e_out.scale)) / f32(divisor)


def avg_pool2d_nhwc(
    x: np.ndarray,
    *,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int],
    count_include_pad: bool,
    e_in: TorchU8Encoding,
    e_out: TorchU8Encoding,
) -> np.ndarray:
    """Quantized ``avg_pool2d`` (channels-last kernel, floor mode) of ``x (N, C, H, W)`` uint8.

    ``pads`` are PyTorch's symmetric ``(pad_h, pad_w)``. Windows sum their in-bounds codes;
    ``n_in`` counts them and the divisor is ``KH·KW`` under ``count_include_pad`` else ``n_in``.
    """
    _, _, h, w = x.shape
    (kh, kw), (ph, pw) = kernel, pads
    around = (ph, pw, ph, pw)
    win = sliding_windows(x, (kh, kw), strides=strides, pads=around, dtype=np.int32)
    total = win.sum(axis=(-2, -1), dtype=np.int64)  # <= 255·KH·KW: exact
    ones = np.ones((h, w), np.int64)
    inside = sliding_windows(ones, (kh, kw), strides=strides, pads=around).sum(axis=(-2, -1))
    acc = total - e_in.zp * inside  # the kernel's int32 accumulator, |acc| < 2**31
    divisor = np.full_like(inside, kh * kw) if count_include_pad else inside
    m = _pool_multiplier(e_in, e_out, divisor)  # (OH, OW)
    return _pool_requantize(acc, m, e_out, AVG_POOL_VECTOR_CHANNELS, fma_vector=False)


def global_avg_pool_nhwc(
    x: np.ndarray, e_in: TorchU8Encoding, e_out: TorchU8Encoding
) -> np.ndarray:
    """Quantized ``adaptive_avg_pool2d(x, 1)`` (channels-last) of ``x (N, C, H, W)`` uint8."""
    _, _, h, w = x.shape
    acc = x.sum(axis=(2, 3), dtype=np.int64, keepdims=True) - e_in.zp * h * w
    m = _pool_multiplier(e_in, e_out, h * w)
    return _pool_requantize(acc, m, e_out, ADAPTIVE_POOL_VECTOR_CHANNELS, fma_vector=True)


def _pool_requantize(acc, m, e_out: TorchU8Encoding, lanes: int, *, fma_vector: bool):
    """u8 codes of pooled accumulators ``acc (N, C, OH, OW)``: vector channels, then the rest."""
    c = acc.shape[1]
    a = acc.astype(np.float32)  # exact: |acc| <= 255·KH·KW < 2**24 for any realistic window
    split = c // lanes * lanes
    if fma_vector:
        vector = _clamp_rne(fma_f32(a[:, :split], rr(rr(m)), f32(e_out.zp)))
    else:
        vector = _clamp_rne(a[:, :split] * m, e_out.zp)
    scalar = quantize_val(a[:, split:], rr(rr(m)), e_out.zp)
    return np.concatenate([vector, scalar], axis=1).astype(np.uint8)
