"""Scalar Python references of the onednn operators, written from the page's pseudo-code.

Slow on purpose: plain loops over Python ints (and ``numpy.float32`` scalars for the f32 steps),
one output element at a time, in the words of ``conformance/onednn.md``. The vectorised
operators are tested against these with ``==`` (DESIGN principle 2).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from quantemu.backends.onednn.params import (
    AvgPool2dParams,
    Conv2dParams,
    ConvImpl,
    DstType,
    Isa,
    MatmulApi,
    MatmulParams,
    MaxPool2dParams,
    PoolImpl,
    QuantizedImpl,
    ReorderParams,
    Requantization,
    SrcType,
)


def sat16(v: int) -> int:
    """``min(max(v, -32768), 32767)``."""
    return min(max(v, -32768), 32767)


def rne_half(w: int) -> int:
    """``rne(w / 2)``, ties to even."""
    return round(w / 2)  # w / 2 is exact in a double; round() is ties-to-even


def pair_sum(a: list[int], b: list[int]) -> int:
    """Page §2: pad an odd segment with a zero, sum ``sat16`` of adjacent pair sums."""
    if len(a) % 2:
        a, b = [*a, 0], [*b, 0]
    return sum(sat16(a[j] * b[j] + a[j + 1] * b[j + 1]) for j in range(0, len(a), 2))


def matmul(a: np.ndarray, b: np.ndarray, p: MatmulParams) -> list[list[int]]:
    """Page §3, one output at a time."""
    m_rows, k = a.shape
    n_cols = b.shape[1]
    zp = p.src_zero_point
    out = []
    for m in range(m_rows):
        row = []
        for n in range(n_cols):
            av = [int(a[m, i]) for i in range(k)]
            bv = [int(b[i, n]) for i in range(k)]
            if p.isa.exact:
                c = sum((av[i] - zp) * bv[i] for i in range(k))
            elif p.src_dt is SrcType.U8:
                c = pair_sum(av, bv) - zp * sum(bv)
            elif p.api is MatmulApi.MATMUL and p.isa is Isa.AVX2 and zp != 0:
                c = sum((av[i] - zp) * bv[i] for i in range(k))
            elif p.api is MatmulApi.GEMM and p.isa is Isa.AVX512_CORE and n_cols == 1:
                c = pair_sum([v + 128 for v in bv], av) - 128 * sum(av)
            else:
                c = pair_sum([v + 128 for v in av], bv) - (128 + zp) * sum(bv)
            row.append(c)
        out.append(row)
    return out


def _segments(impl: ConvImpl, cg: int, kh: int, kw: int) -> list[list[tuple[int, int, int]]]:
    """The segments of page §5.2 as lists of ``(c, kh, kw)``."""
    if impl is ConvImpl.DIRECT:
        return [[(c, i, j) for c in range(cg)] for i in range(kh) for j in range(kw)]
    if impl is ConvImpl.RELO_W:
        return [[(c, i, j) for j in range(kw) for c in range(cg)] for i in range(kh)]
    if impl is ConvImpl.RELO_WH:
        return [[(c, i, j) for j in range(kw) for i in range(kh) for c in range(cg)]]
    return [[(c, i, j) for i in range(kh) for j in range(kw) for c in range(cg)]]


def conv2d(x: np.ndarray, w: np.ndarray, p: Conv2dParams) -> np.ndarray:
    """Page §5.1, one output element at a time."""
    n_b, _, h, wd = x.shape
    o_ch, _, kh, kw = w.shape
    oh_n, ow_n = p.geometry.output_size(h, wd, kh, kw)
    y = np.zeros((n_b, o_ch, oh_n, ow_n), dtype=np.int64)
    for n in range(n_b):
        for o in range(o_ch):
            for oh in range(oh_n):
                for ow in range(ow_n):
                    y[n, o, oh, ow] = _conv_output(x, w, p, (n, o, oh, ow))
    return y


def _conv_output(x: np.ndarray, w: np.ndarray, p: Conv2dParams, pos: tuple) -> int:
    """One accumulator ``y[n, o, oh, ow]``."""
    n, o, oh, ow = pos
    _, cg, kh, kw = w.shape
    g = p.geometry
    top, left, _, _ = g.pads
    grp = o // (w.shape[0] // g.groups)
    zp = p.src_zero_point

    def src(t):  # None: out of bounds
        c, i, j = t
        ih = oh * g.strides[0] - top + i * g.dilations[0]
        iw = ow * g.strides[1] - left + j * g.dilations[1]
        if 0 <= ih < x.shape[2] and 0 <= iw < x.shape[3]:
            return int(x[n, grp * cg + c, ih, iw])
        return None

    def wt(t):
        return int(w[o, t[0], t[1], t[2]])

    taps = [(c, i, j) for i in range(kh) for j in range(kw) for c in range(cg)]
    inb = [t for t in taps if src(t) is not None]
    if p.isa.exact or p.impl is ConvImpl.REF:
        return sum((src(t) - zp) * wt(t) for t in inb)
    if p.src_dt is SrcType.S8:
        return 2 * sum((src(t) - zp) * rne_half(wt(t)) for t in inb)
    v = -zp * sum(wt(t) for t in inb)
    for seg in _segments(p.impl, cg, kh, kw):
        v += pair_sum([src(t) or 0 for t in seg], [wt(t) for t in seg])
    return v


def requantize(
    acc: int,
    w_scale: float,
    q: Requantization,
    impl: QuantizedImpl,
    *,
    linear: bool,
    bias: float | None = None,
) -> int:
    """Page §6.2 for one accumulator, with ``numpy.float32`` scalar steps."""
    f = np.float32
    one = f(1.0)

    def rr(s):
        return one / f(s)

    s_eff = rr(rr(f(q.x_scale)))
    w_eff = rr(rr(f(w_scale))) if linear else f(w_scale)
    a = f(acc)
    with np.errstate(over="ignore", invalid="ignore"):
        v = a * (s_eff * w_eff) if impl is QuantizedImpl.JIT_UNI else (a * s_eff) * w_eff
        if bias is not None:
            v = v + f(bias)
        v = v / rr(rr(f(q.y_scale))) if impl is QuantizedImpl.REF else v * rr(f(q.y_scale))
        v = v + f(q.y_zero_point)
    return _clamp_rne(float(v), 0, 255)


def _clamp_rne(v: float, lo: int, hi: int) -> int:
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(round(v), lo), hi)


def avg_pool2d(x: np.ndarray, p: AvgPool2dParams) -> np.ndarray:
    """Page §7 (average), one output element at a time."""
    n_b, c_n, h, wd = x.shape
    kh, kw = p.kernel
    oh_n, ow_n = p.geometry.output_size(h, wd, kh, kw)
    lo, hi = (-128, 127) if x.dtype == np.int8 else (0, 255)
    y = np.zeros((n_b, c_n, oh_n, ow_n), dtype=x.dtype)
    for n in range(n_b):
        for c in range(c_n):
            for oh in range(oh_n):
                for ow in range(ow_n):
                    vals = _window(x, (n, c, oh, ow), p)
                    s = sum(vals)
                    cnt = len(vals) if p.exclude_padding else kh * kw
                    if p.impl is PoolImpl.JIT:
                        v = np.float32(s) * (np.float32(1.0) / np.float32(cnt))
                    else:
                        v = np.float32(s) / np.float32(cnt)
                    y[n, c, oh, ow] = _clamp_rne(float(v), lo, hi)
    return y


def max_pool2d(x: np.ndarray, p: MaxPool2dParams) -> np.ndarray:
    """Page §7 (max), one output element at a time."""
    n_b, c_n, h, wd = x.shape
    oh_n, ow_n = p.geometry.output_size(h, wd, *p.kernel)
    y = np.zeros((n_b, c_n, oh_n, ow_n), dtype=x.dtype)
    for n in range(n_b):
        for c in range(c_n):
            for oh in range(oh_n):
                for ow in range(ow_n):
                    y[n, c, oh, ow] = max(_window(x, (n, c, oh, ow), p))
    return y


def _window(x, pos, p) -> list[int]:
    """The in-bounds values of the window of output ``pos = (n, c, oh, ow)``."""
    n, c, oh, ow = pos
    top, left, _, _ = p.pads
    vals = []
    for i in range(p.kernel[0]):
        for j in range(p.kernel[1]):
            ih = oh * p.strides[0] - top + i
            iw = ow * p.strides[1] - left + j
            if 0 <= ih < x.shape[2] and 0 <= iw < x.shape[3]:
                vals.append(int(x[n, c, ih, iw]))
    return vals


def reorder(x: np.ndarray, p: ReorderParams) -> list[int]:
    """Page §8, one element at a time."""
    f = np.float32
    lo, hi = p.dst_dt.bounds
    out = []
    for xv in x.tolist():
        with np.errstate(over="ignore", invalid="ignore"):
            v = f(xv) * f(p.src_scale) * (f(1.0) / f(p.dst_scale))
        if math.isnan(float(v)):
            plain = p.src_scale == 1.0 and p.dst_scale == 1.0
            u8_255 = p.dst_dt is DstType.U8 and plain and p.isa.avx512
            out.append(255 if u8_255 else lo)
        else:
            out.append(_clamp_rne(float(v), lo, hi))
    return out


def fma32(a: float, b: float, c: float) -> np.float32:
    """``fma(a, b, c)`` in binary32: the binary32 value nearest to the exact ``a·b + c`` (ties to
    an even significand), chosen among the neighbours of its binary64 rounding; an exact zero
    is signed as IEEE 754 signs it (``fma(0.5, -0.0, -0.0) = -0.0``)."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if exact == 0:  # IEEE 754: -0 only when both addends are -0 (a zero product's sign is a^b's)
        minus = np.signbit(c) and (a == 0 or b == 0) and np.signbit(a) != np.signbit(b)
        return np.float32(-0.0 if minus else 0.0)
    guess = np.float32(float(exact))
    near = [np.nextafter(guess, np.float32(d)) for d in (-np.inf, np.inf)]
    return min(
        [guess, *near],
        key=lambda v: (abs(Fraction(float(v)) - exact), int(np.array(v).view(np.int32)) & 1),
    )


def layer_norm(
    q: np.ndarray, gamma, beta, *, xq: tuple[float, int], yq: tuple[float, int], eps: float
) -> list[list[int]]:
    """``quantized::layer_norm`` over the last axis, one row and one code at a time
    (:mod:`.layer_norm`): ``xq``/``yq`` are the ``(scale, zero_point)`` of input and output."""
    f = np.float32
    (xs, xzp), (ys, yzp) = (f(xq[0]), xq[1]), (f(yq[0]), yq[1])
    n = q.shape[-1]
    body, inv = n // 32 * 32, f(1) / ys
    out = []
    for row in q.reshape(-1, n).tolist():
        m = f(sum(row)) / f(n)
        mean = m - f(xzp)
        var = max(fma32(-m, m, f(sum(v * v for v in row)) / f(n)), f(0))
        k = f(float(xs) / math.sqrt(float(var * xs * xs) + eps))
        codes = []
        for j, code in enumerate(row):
            y = fma32((f(code - xzp) - mean) * k, f(gamma[j]), f(beta[j]))
            r = round(float(y * inv)) + yzp if j < body else round(float(f(yzp) + y * inv))
            codes.append(min(max(r, 0), 255))
        out.append(codes)
    return out


def _hard(x: np.float32, swish: bool) -> np.float32:
    """``min(max(x ⊕ 3, 0), 6) ⊘ 6``, times ``x`` first for hardswish (binary32 steps)."""
    f = np.float32
    t = min(max(x + f(3), f(0)), f(6))
    return (x * t) / f(6) if swish else t / f(6)


def hard_activation(
    codes: list[int], *, xq: tuple[float, int], yq: tuple[float, int], swish: bool
) -> list[int]:
    """``quantized::hardswish`` (``swish``) or ``hardsigmoid`` of codes listed in memory order,
    one thread: the first ``len // 64 * 64`` codes take the vector body (``fma`` dequantize,
    ``rne(y ⊗ inv) + zp``), the rest the scalar tail (``s ⊗ (q − z)``, ``rne(zp ⊕ y ⊗ inv)``)."""
    f = np.float32
    (xs, xz), (ys, yz) = (f(xq[0]), int(xq[1])), yq
    inv = f(1.0 / float(f(ys)))
    body, out = len(codes) // 64 * 64, []
    for j, q in enumerate(codes):
        if j < body:
            y = _hard(fma32(xs, f(q), xs * f(-xz)), swish)
            r = round(float(y * inv)) + int(yz)
        else:
            y = _hard(xs * f(q - xz), swish)
            r = round(float(f(yz) + y * inv))
        out.append(min(max(r, 0), 255))
    return out


def quantized_mul(
    a: list[int], b: list[int], *, aq: tuple[float, int], bq: tuple[float, int], yq
) -> list[int]:
    """``quantized::mul`` of two equally long code lists (broadcast beforehand): the integer
    product ``(a − za)(b − zb)``, ``rne(f32(c) ⊗ m) + zo``, ``m = (sa ⊗ sb) ⊗ rr(so)``."""
    f = np.float32
    m = (f(aq[0]) * f(bq[0])) * (f(1) / f(yq[0]))
    out = []
    for qa, qb in zip(a, b, strict=True):
        c = (qa - int(aq[1])) * (qb - int(bq[1]))
        out.append(min(max(round(float(f(c) * m)) + int(yq[1]), 0), 255))
    return out
