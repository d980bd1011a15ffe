"""MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (2-D, NCHW).

Normalized attributes: ``kernel_shape``, ``strides``, ``dilations``, ``pads=(top, left, bottom,
right)``, ``ceil_mode`` (0/1), and for AveragePool ``count_include_pad`` (0/1).

With ``ceil_mode`` the output may have one more window per axis than with floor, but (as in
onnxruntime and PyTorch) a window must start inside the input or its leading padding. Windows
that hang over the end are filled with ``-inf`` (max) or ``0`` (average); the average divides by
the number of window positions inside the input (``count_include_pad=0``) or inside the padded
input (``count_include_pad=1``), never counting the ceil overhang.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Dim, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register
from quantemu.graph.ops.conv import conv_out_dim, pad_or_crop


def pool_out_dim(size: Dim, k: int, s: int, d: int, pads: tuple[int, int], *, ceil: bool) -> Dim:
    """Output length of a pooling axis (see the module docstring for the ceil rule)."""
    pad0, pad1 = pads
    out = conv_out_dim(size, k, s, d, pad0 + pad1, ceil=ceil)
    if ceil and known(out) and (out - 1) * s >= size + pad0:
        out -= 1
    return out


def _infer_pool(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0, 4)
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    if max(pt, pb) >= (kh - 1) * dh + 1 or max(pl, pr) >= (kw - 1) * dw + 1:
        raise fail(node, f"pads {a['pads']} must be smaller than the kernel {kh}x{kw}")
    oh = pool_out_dim(x.shape[2], kh, sh, dh, (pt, pb), ceil=bool(a["ceil_mode"]))
    ow = pool_out_dim(x.shape[3], kw, sw, dw, (pl, pr), ceil=bool(a["ceil_mode"]))
    if (known(oh) and oh < 1) or (known(ow) and ow < 1):
        raise fail(node, f"input {x.shape} is smaller than the pooling window {kh}x{kw}")
    return [(*x.shape[:2], oh, ow)]


def _padded(x: np.ndarray, attrs: Attrs, value: float) -> tuple[np.ndarray, int, int]:
    """``x`` padded by ``pads`` plus the ceil overhang; also the output size."""
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    h, w = x.shape[2:]
    ceil = bool(attrs["ceil_mode"])
    oh = pool_out_dim(h, kh, sh, dh, (pt, pb), ceil=ceil)
    ow = pool_out_dim(w, kw, sw, dw, (pl, pr), ceil=ceil)
    extra_h = max((oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb), 0)
    extra_w = max((ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr), 0)
    return pad_or_crop(x, (pt, pl, pb + extra_h, pr + extra_w), value), oh, ow


def _taps(xp: np.ndarray, attrs: Attrs, oh: int, ow: int):
    """Each kernel tap's strided view ``(N, C, OH, OW)`` of the padded input.

    Pooling reduces over a handful of taps (kh*kw); looping over the taps, each step vectorized
    over every pixel and channel, is several times faster than reducing a strided window view.
    """
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    for i in range(kh):
        for j in range(kw):
            yield xp[
                :,
                :,
                i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                j * dw : j * dw + (ow - 1) * sw + 1 : sw,
            ]


def _run_max(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    xp, oh, ow = _padded(inputs[0], attrs, -np.inf)
    taps = _taps(xp, attrs, oh, ow)
    out = np.array(next(taps), dtype=np.float32)
    for tap in taps:
        np.maximum(out, tap, out=out)
    return [out]


def _window_counts(size, k, s, d, pads, *, out: int, include_pad: bool) -> np.ndarray:
    """Per output position, how many of the window's taps the average divides by."""
    pad0, pad1 = pads
    starts = np.arange(out) * s
    positions = starts[:, None] + np.arange(k) * d
    lo, hi = (0, size + pad0 + pad1) if include_pad else (pad0, pad0 + size)
    return ((positions >= lo) & (positions < hi)).sum(axis=1)


def _run_average(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    xp, oh, ow = _padded(x, attrs, 0.0)
    taps = _taps(xp, attrs, oh, ow)
    out = np.array(next(taps), dtype=np.float32)
    for tap in taps:
        out += tap
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    include = bool(attrs["count_include_pad"])
    ch = _window_counts(x.shape[2], kh, sh, dh, (pt, pb), out=oh, include_pad=include)
    cw = _window_counts(x.shape[3], kw, sw, dw, (pl, pr), out=ow, include_pad=include)
    out /= np.outer(ch, cw).astype(np.float32)
    return [out]


def _infer_global(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    if x.rank < 3:
        raise fail(node, f"input must have rank >= 3 (N, C, spatial...), got {x.shape}")
    return [(*x.shape[:2], *(1,) * (x.rank - 2))]


def _run_global_average(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    return [np.mean(x, axis=axes, keepdims=True, dtype=np.float32)]


def _run_global_max(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    return [np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)]


register("MaxPool", _infer_pool, _run_max)
register("AveragePool", _infer_pool, _run_average)
register("GlobalAveragePool", _infer_global, _run_global_average)
register("GlobalMaxPool", _infer_global, _run_global_max)
