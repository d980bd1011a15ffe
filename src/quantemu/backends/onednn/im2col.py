"""Reduction layouts of oneDNN's convolution kernels: segments, im2col and weight columns.

On non-VNNI ISAs the order in which a kernel walks the ``(c, kh, kw)`` reduction decides which
products meet in a ``VPMADDUBSW`` pair (page §5.2). A layout lists the reduction *slots* of one
output element in kernel order, each segment zero-padded to an even length; a slot is
``(c, kh, kw)``, or a padding slot that always holds 0. ``im2col`` gathers the source values of
every output position into those slots (0 for out-of-bounds taps, in their place), and
``weight_columns`` does the same for the weights, so that every pairing order becomes a plain
matrix product ``cols @ wcols`` over the slots.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.params import ConvGeometry, ConvImpl
from quantemu.intmath import sliding_windows


@dataclass(frozen=True)
class Layout:
    """Slot table of one output element: ``c``, ``kh``, ``kw`` per slot (``c = -1``: padding)."""

    c: np.ndarray
    kh: np.ndarray
    kw: np.ndarray

    @property
    def length(self) -> int:
        """Number of slots (even when the layout is used for pairing)."""
        return int(self.c.size)


@functools.lru_cache(maxsize=1024)
def segment_layout(impl: ConvImpl | None, cg: int, kh: int, kw: int) -> Layout:
    """The slots of ``impl``'s pairing order (page §5.2); ``None``: exact, im2col order.

    - ``direct``: one segment per tap ``(kh, kw)``, ``c = 0 … Cg−1``;
    - ``relo_w``: one segment per kernel row: ``for kw: for c``;
    - ``relo_wh``: one segment, kw-major: ``for kw: for kh: for c``;
    - ``gemm`` (and exact): one segment in im2col order ``for kh: for kw: for c``.
    """
    c, h, w = np.indices((cg, kh, kw))
    order = (2, 1, 0) if impl is ConvImpl.RELO_WH else (1, 2, 0)  # (kw, kh, c) / (kh, kw, c)
    grid = [a.transpose(order) for a in (c, h, w)]
    if impl is ConvImpl.DIRECT:
        segments = kh * kw
    elif impl is ConvImpl.RELO_W:
        segments = kh
    else:
        segments = 1
    grid = [a.reshape(segments, -1) for a in grid]
    if impl is not None and grid[0].shape[1] % 2:
        # Odd segment: VPMADDUBSW pairs its last element with a zero (page §2, pair_sum).
        fill = (-1, 0, 0)
        grid = [
            np.pad(a, ((0, 0), (0, 1)), constant_values=v) for a, v in zip(grid, fill, strict=True)
        ]
    slots = [np.ascontiguousarray(a.reshape(-1)) for a in grid]
    for a in slots:  # shared by every call (cached): read-only
        a.setflags(write=False)
    return Layout(*slots)


def im2col(
    x: np.ndarray, geometry: ConvGeometry, layout: Layout, out_hw: tuple[int, int]
) -> np.ndarray:
    """Source values ``(G, N·OH·OW, L)`` of ``x (N, C, H, W)`` in the slots of ``layout``.

    Out-of-bounds taps and padding slots hold 0 (page §5.1: out-of-bounds taps contribute source
    value 0 in their place in the segment). The dtype of ``x`` is kept. The windows are copied
    once in the dense ``(kh, kw, c)`` order; a layout in another order (or with padding slots)
    then picks its columns from that copy.
    """
    g = geometry.groups
    cg = x.shape[1] // g
    kernel = (int(layout.kh.max()) + 1, int(layout.kw.max()) + 1)
    dense = _dense_windows(x, geometry, kernel, out_hw)
    if is_dense(layout, cg, *kernel):
        return dense
    taps = kernel[0] * kernel[1] * cg
    index = np.where(layout.c < 0, taps, (layout.kh * kernel[1] + layout.kw) * cg + layout.c)
    zero = np.zeros((*dense.shape[:2], 1), dtype=dense.dtype)  # what padding slots read
    return np.concatenate([dense, zero], axis=2)[:, :, index]


def is_dense(layout: Layout, cg: int, kh: int, kw: int) -> bool:
    """True when ``layout`` is the plain ``(kh, kw, c)`` order without padding slots."""
    taps = cg * kh * kw
    if layout.length != taps or (layout.c < 0).any():
        return False
    index = (layout.kh * kw + layout.kw) * cg + layout.c
    return bool(np.array_equal(index, np.arange(taps)))


def _dense_windows(
    x: np.ndarray, geometry: ConvGeometry, kernel: tuple[int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """``(G, N·OH·OW, KH·KW·C/G)`` windows of ``x (N, C, H, W)`` in ``(kh, kw, c)`` order.

    A strided, dilated window view (:func:`~quantemu.intmath.sliding_windows`) of the
    zero-padded NHWC input, materialised by one reshape.
    """
    n, c = x.shape[:2]
    g = geometry.groups
    oh, ow = out_hw
    win = sliding_windows(
        x.transpose(0, 2, 3, 1),  # NHWC: the padding copy (if any) is then channel-minor
        kernel,
        strides=geometry.strides,
        dilations=geometry.dilations,
        pads=geometry.pads,
        axes=(1, 2),
    )  # (N, OH, OW, C, KH, KW)
    kh, kw = kernel
    win = win[:, :oh, :ow].reshape(n, oh, ow, g, c // g, kh, kw)  # splits C: still a view
    win = win.transpose(3, 0, 1, 2, 5, 6, 4)  # (G, N, OH, OW, KH, KW, C/G)
    return np.ascontiguousarray(win.reshape(g, n * oh * ow, kh * kw * (c // g)))


def dense_columns(
    x: np.ndarray, geometry: ConvGeometry, kernel: tuple[int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """``(G, N·OH·OW, KH·KW·C/G)`` windows in ``(kh, kw, c)`` order, as the transposed view of a
    C-contiguous ``(G, KH·KW·C/G, N·OH·OW)`` array.

    The same values as :func:`im2col`'s dense layout. Stored column-major, they feed the int8
    engine's transposed product, whose result is then channel-major: for one image it already
    is the NCHW accumulator, with no layout pass. Each tap ``(kh, kw)`` copies its in-bounds
    rectangle of the NCHW input in one strided slice (no padded or channels-last copy first);
    the out-of-bounds positions keep the zeros they were allocated with.
    """
    n, c, h, w = x.shape
    g = geometry.groups
    oh, ow = out_hw
    kh, kw = kernel
    cols = np.zeros((g, kh, kw, c // g, n, oh, ow), dtype=x.dtype)
    src = x.reshape(n, g, c // g, h, w).transpose(1, 2, 0, 3, 4)  # (G, C/G, N, H, W): a view
    rows = [_tap_range(i, oh, h, geometry, 0) for i in range(kh)]
    cols_w = [_tap_range(j, ow, w, geometry, 1) for j in range(kw)]
    sh, sw = geometry.strides
    for i, (o0, o1, i0) in enumerate(rows):
        for j, (p0, p1, j0) in enumerate(cols_w):
            if o1 > o0 and p1 > p0:
                ih = slice(i0, i0 + (o1 - o0 - 1) * sh + 1, sh)
                iw = slice(j0, j0 + (p1 - p0 - 1) * sw + 1, sw)
                cols[:, i, j, :, :, o0:o1, p0:p1] = src[..., ih, iw]
    return cols.reshape(g, kh * kw * (c // g), n * oh * ow).swapaxes(1, 2)


def _tap_range(tap: int, out: int, size: int, geometry: ConvGeometry, axis: int):
    """``(o0, o1, first)``: the outputs ``o0 <= o < o1`` whose ``tap`` reads inside the input
    along ``axis`` (0: rows, 1: columns), and the input index that ``o0`` reads."""
    stride, dil, pad = geometry.strides[axis], geometry.dilations[axis], geometry.pads[axis]
    offset = tap * dil - pad  # input index read by output 0
    o0 = max(0, -(offset // stride)) if offset < 0 else 0
    o1 = min(out, (size - 1 - offset) // stride + 1) if size - 1 - offset >= 0 else 0
    return o0, max(o0, o1), offset + o0 * stride


def in_bounds(
    hw: tuple[int, int], geometry: ConvGeometry, layout: Layout, out_hw: tuple[int, int]
) -> np.ndarray:
    """``(OH·OW, L)`` uint8 mask: 1 where a slot reads an in-bounds source value.

    The zero-point correction sums the weights of exactly these slots (page §5.1).
    """
    h, w = hw
    top, left, _, _ = geometry.pads
    sh, sw = geometry.strides
    dh, dw = geometry.dilations
    oh, ow = out_hw
    ih = np.arange(oh)[:, None] * sh - top + layout.kh * dh  # (OH, L)
    iw = np.arange(ow)[:, None] * sw - left + layout.kw * dw  # (OW, L)
    ok_h = (ih >= 0) & (ih < h)
    ok_w = (iw >= 0) & (iw < w)
    mask = ok_h[:, None, :] & ok_w[None, :, :] & (layout.c >= 0)
    return mask.reshape(oh * ow, layout.length).astype(np.uint8)


def weight_columns(w: np.ndarray, groups: int, layout: Layout) -> np.ndarray:
    """Weights ``(G, L, O/G)`` of ``w (O, C/G, KH, KW)`` in the slots of ``layout`` (0 on pads)."""
    o, cg, kh, kw = w.shape
    og = o // groups
    wz = np.zeros((groups, og, cg + 1, kh, kw), dtype=w.dtype)
    wz[:, :, :cg] = w.reshape(groups, og, cg, kh, kw)
    chan = np.where(layout.c < 0, cg, layout.c)
    return wz[:, :, chan, layout.kh, layout.kw].transpose(0, 2, 1)
