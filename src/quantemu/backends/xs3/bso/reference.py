"""A naive scalar model of the XS3 operators, written line by line from ``conformance/xs3.md``.

Python ints only, loops everywhere: slow but obviously the page's pseudo-code, the twin the
vectorised operators (:mod:`.conv`, :mod:`.fc`) are checked against with ``==``
(``tests/backends/xs3/test_xs3_reference.py``). The device model follows the page's section 7
(per-32 chunks for deep/shallowin/1x1/fc, per-product saturation for depthwise in row-major tap
order, no wrap in rounding adds, per-chunk saturation for the legacy fc). Not used by the
emulation itself.
"""

from __future__ import annotations

import numpy as np

RAIL = 2**31 - 1


def sat(v: int, bits: int) -> int:
    """``SAT_bits``: symmetric saturation to +-(2^(bits-1) - 1)."""
    m = 2 ** (bits - 1) - 1
    return min(max(v, -m), m)


def wrap32(v: int) -> int:
    """``v`` wrapped to int32 (two's complement)."""
    return ((v + 2**31) % 2**32) - 2**31


def rshr(v: int, s: int) -> int:
    """``RSHR(v, s)``: shift right rounding ties toward +inf, exact."""
    return v if s == 0 else (v + 2 ** (s - 1)) // 2**s


def rshr_w(v: int, s: int) -> int:
    """``RSHR_W(v, s)``: as :func:`rshr` with the rounding add wrapped to int32."""
    return v if s == 0 else wrap32(v + 2 ** (s - 1)) // 2**s


def bso_fields(bso: np.ndarray, k: int) -> tuple[int, ...]:
    """Channel ``k``'s ``(bias, shift1, scale, offset_scale, offset, shift2)`` from a BSO block."""
    g, j = divmod(k, 16)
    w = [int(bso[g, r, j]) for r in range(7)]
    bias = w[0] * 65536 + (w[1] & 0xFFFF)
    return bias, w[2] & 0xFFFF, w[3], w[4], w[5], w[6] & 0xFFFF


def output(acc: int, fields, op: str, symmetric: bool, device: bool) -> int:
    """Section 5: the BSO output stage of ``op``."""
    _, s1, scale, oscale, off, s2 = fields
    first = rshr if device else rshr_w
    r = sat(first(acc, s1), 16)
    a2 = r * scale + oscale * off
    lo = -127 if symmetric else -128
    if op in ("conv2d_deep", "conv2d_shallowin"):
        return min(max((rshr if device else rshr_w)(a2, s2), lo), 127)
    if op == "fully_connected_16":
        return sat((rshr if device else rshr_w)(a2, s2), 16)
    return min(max(rshr(a2, s2), lo), 127)


def xz(x, row, col, i, zp) -> int:
    """``x[row, col, i]``, or the zero point outside the image (padding)."""
    if 0 <= row < x.shape[0] and 0 <= col < x.shape[1]:
        return int(x[row, col, i])
    return zp


def rows_order(top: int, k_h: int, x_h: int) -> list[int]:
    """``ROWS(oy)``: kernel rows above the image, then below it, then inside, each ascending."""
    above = [r for r in range(k_h) if top + r < 0]
    below = [r for r in range(k_h) if top + r >= x_h]
    inside = [r for r in range(k_h) if 0 <= top + r < x_h]
    return above + below + inside


def _deep_acc(x, k, co, top, left, *, bias, zp, k_w) -> int:
    acc = bias
    c_in = x.shape[2]
    for r in rows_order(top, k.shape[1], x.shape[0]):
        for c in range(k_w):
            xs = [xz(x, top + r, left + c, i, zp) for i in range(c_in)]
            for a in range(0, c_in, 32):
                s = sum(xs[i] * int(k[co, r, c, i]) for i in range(a, min(a + 32, c_in)))
                acc = sat(acc + s, 32)
    return acc


def _shallow_acc(x, k, co, top, left, *, bias, zp) -> int:
    acc = bias
    c_in = x.shape[2]
    for r in rows_order(top, k.shape[1], x.shape[0]):
        s = 0
        for c in range(32 // c_in):
            for i in range(c_in):
                s += xz(x, top + r, left + c, i, zp) * int(k[co, r, c, i])
        acc = sat(acc + s, 32)
    return acc


def window_origins(window, y_params):
    """``(oy, ox, top, left)`` for every output pixel: the window's top-left input position."""
    for oy in range(y_params["height"]):
        for ox in range(y_params["width"]):
            top = window["start_row"] + oy * window["stride_v"]
            yield oy, ox, top, window["start_col"] + ox * window["stride_h"]


def conv_windowed_acc(op, x, k, bso, *, zp, window, y_params) -> np.ndarray:
    """The int32 accumulators of deep or shallowin (the same on host and device)."""
    yh, yw, c_out = y_params["height"], y_params["width"], y_params["channels"]
    acc = np.zeros((yh, yw, c_out), dtype=np.int64)
    for oy, ox, top, left in window_origins(window, y_params):
        for co in range(c_out):
            bias = bso_fields(bso, co)[0]
            if op == "conv2d_deep":
                v = _deep_acc(x, k, co, top, left, bias=bias, zp=zp, k_w=window["width"])
            else:
                v = _shallow_acc(x, k, co, top, left, bias=bias, zp=zp)
            acc[oy, ox, co] = v
    return acc


def conv_windowed(op, x, k, bso, *, zp, window, y_params, symmetric, device) -> np.ndarray:
    """``conv2d_deep`` / ``conv2d_shallowin`` outputs (section 5's output stage per channel)."""
    acc = conv_windowed_acc(op, x, k, bso, zp=zp, window=window, y_params=y_params)
    out = np.zeros(acc.shape, dtype=np.int8)
    for idx in np.ndindex(acc.shape):
        out[idx] = output(int(acc[idx]), bso_fields(bso, idx[2]), op, symmetric, device)
    return out


def conv2d_1x1(x, k, bso, *, symmetric, device) -> np.ndarray:
    """``conv2d_1x1``: saturation after every product (host) or per 32 (device)."""
    h, w, c_in = x.shape
    c_out = k.shape[0]
    out = np.zeros((h, w, c_out), dtype=np.int8)
    for yy in range(h):
        for xx in range(w):
            for co in range(c_out):
                f = bso_fields(bso, co)
                acc = f[0]
                step = 32 if device else 1
                for a in range(0, c_in, step):
                    s = sum(
                        int(x[yy, xx, i]) * int(k[co, i]) for i in range(a, min(a + step, c_in))
                    )
                    acc = sat(acc + s, 32)
                out[yy, xx, co] = output(acc, f, "conv2d_1x1", symmetric, device)
    return out


def conv2d_depthwise(x, k, bso, *, zp, window, y_params, symmetric, device) -> np.ndarray:
    """``conv2d_depthwise``: a wrapping int32 sum (host) or saturation per product (device)."""
    yh, yw, c = y_params["height"], y_params["width"], x.shape[2]
    out = np.zeros((yh, yw, c), dtype=np.int8)
    for oy, ox, top, left in window_origins(window, y_params):
        for ch in range(c):
            f = bso_fields(bso, ch)
            acc = f[0]
            for r in range(window["height"]):
                for cc in range(window["width"]):
                    p = xz(x, top + r, left + cc, ch, zp) * int(k[r, cc, ch])
                    acc = sat(acc + p, 32) if device else acc + p
            acc = acc if device else wrap32(acc)
            out[oy, ox, ch] = output(acc, f, "conv2d_depthwise", symmetric, device)
    return out


def fully_connected(op, w, x, bso, *, symmetric, device) -> np.ndarray:
    """``fully_connected_8`` / ``_16``: one saturation (host) or one per 32 (device)."""
    c_out, c_in = w.shape
    dtype = np.int16 if op == "fully_connected_16" else np.int8
    out = np.zeros(c_out, dtype=dtype)
    for co in range(c_out):
        f = bso_fields(bso, co)
        if device:
            acc = f[0]
            for a in range(0, c_in, 32):
                acc = sat(
                    acc + sum(int(w[co, i]) * int(x[i]) for i in range(a, min(a + 32, c_in))), 32
                )
        else:
            acc = sat(f[0] + sum(int(w[co, i]) * int(x[i]) for i in range(c_in)), 32)
        out[co] = output(acc, f, op, symmetric, device)
    return out


def fc_legacy(out_bits, tensors, *, device) -> np.ndarray:
    """``fc_deepin_shallowout_8`` / ``_16`` from ``(W, B, X, shifts, scales)``."""
    w, b, x, shifts, scales = tensors
    c_out, c_in = w.shape
    out = np.zeros(c_out, dtype=np.int16 if out_bits == 16 else np.int8)
    for co in range(c_out):
        acc = int(b[co])
        for a in range(0, c_in, 32):
            s = sum(int(w[co, i]) * int(x[i]) for i in range(a, a + 32))
            acc = sat(acc + s, 32) if device else max(wrap32(acc + s), -RAIL)
        r = sat((rshr if device else rshr_w)(acc, int(shifts[co])), 16)
        y16 = sat(rshr(r * int(scales[co]), 14), 16)
        out[co] = y16 if out_bits == 16 else sat(rshr(y16, 8), 8)
    return out
