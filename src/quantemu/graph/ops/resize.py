"""Resize (and the older Upsample, imported as Resize) in ``nearest`` and ``linear`` mode.

Normalized attributes: ``mode`` (``"nearest"`` or ``"linear"``), ``coordinate_transformation_mode``,
``nearest_mode`` (read in nearest mode only), and either ``scales`` (one float per axis) or
``sizes`` (one int per axis); the other is ``()``.

Nearest: each output coordinate is mapped back to the input with the coordinate
transformation, in float32 as onnxruntime computes it, rounded by ``nearest_mode`` and clamped
into the input; the output is one gather per resized axis.

Linear: bilinear over H and W of an NCHW tensor (N and C kept), as onnxruntime's
``UpsampleBilinear`` computes it in float32: the source coordinate is clamped into the input,
its two neighbours are ``floor`` and ``floor + 1`` (clamped), their weights the distances to
them (``0.5`` each where both are the last pixel), and the four products are summed in
onnxruntime's order, so that the result is its bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register

#: The coordinate transformations supported in nearest mode (all but tf_crop_and_resize).
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: The coordinate transformations supported in linear mode.
LINEAR_COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _infer_resize(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    scales, sizes = node.attrs["scales"], node.attrs["sizes"]
    target = sizes or scales
    if len(target) != x.rank:
        raise fail(node, f"{'sizes' if sizes else 'scales'} {target} do not match rank {x.rank}")
    if node.attrs.get("mode", "nearest") == "linear" and (
        x.rank != 4
        or (sizes and tuple(sizes[:2]) != tuple(x.shape[:2]))
        or scales[:2] not in ((), (1.0, 1.0))
    ):
        raise fail(
            node, f"linear mode resizes H and W of an NCHW tensor; got {target} for {x.shape}"
        )
    if sizes:
        return [tuple(int(s) for s in sizes)]
    out = []
    for dim, scale in zip(x.shape, scales, strict=True):
        if scale <= 0:
            raise fail(node, f"scales {scales} must be positive")
        if scale == 1.0:
            out.append(dim)
        else:
            out.append(resized_size(dim, scale) if known(dim) else "?")
    return [tuple(out)]


def resized_size(size_in: int, scale: float) -> int:
    """The output size of an axis given by a scale, as onnxruntime computes it: the product in
    float32, truncated (``floor(size_in * scale)`` in exact arithmetic but for rounding)."""
    return int(np.float32(scale) * np.float32(size_in))


def source_coordinate(mode: str, size_in: int, size_out: int, scale: float) -> np.ndarray:
    """For each output position along an axis, the input coordinate it maps to (float32,
    onnxruntime's ``GetOriginalCoordinateFromResizedCoordinate``)."""
    x = np.arange(size_out, dtype=np.float32)
    s = np.float32(scale)
    half = np.float32(0.5)
    if mode == "half_pixel":
        orig = (x + half) / s - half
    elif mode == "pytorch_half_pixel":
        orig = (x + half) / s - half if size_out > 1 else np.zeros_like(x)
    elif mode == "half_pixel_symmetric":
        adjustment = np.float32(size_out) / (s * np.float32(size_in))
        offset = np.float32(size_in) / 2 * (1 - adjustment)
        # onnxruntime adds the double 0.5: this part is computed in float64, then rounded
        orig = (offset + (x.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(np.float32)
    elif mode == "align_corners":  # x * (in - 1) / (out - 1), in that order (0 for one pixel)
        orig = x * np.float32(size_in - 1) / np.float32(max(size_out - 1, 1))
    elif mode == "asymmetric":
        orig = x / s
    else:  # tf_half_pixel_for_nn
        orig = (x + half) / s
    return orig


def source_index(mode: str, rounding: str, size_in: int, size_out: int, scale: float):
    """For each output position along an axis, the input position nearest mode reads."""
    orig = source_coordinate(mode, size_in, size_out, scale)
    half = np.float32(0.5)
    if rounding == "round_prefer_floor":
        index = np.ceil(orig - half)
    elif rounding == "round_prefer_ceil":
        index = np.floor(orig + half)
    elif rounding == "floor":
        index = np.floor(orig)
    else:
        index = np.ceil(orig)
    return np.clip(index, 0, size_in - 1).astype(np.intp)


def _axis_geometry(attrs: Attrs, axis: int, size_in: int) -> tuple[int, float]:
    """``(size_out, scale)`` of one axis (a scale from sizes as the quotient)."""
    if attrs["sizes"]:
        size_out = int(attrs["sizes"][axis])
        return size_out, size_out / size_in
    scale = attrs["scales"][axis]
    return resized_size(size_in, scale), scale


def _same_shape(attrs: Attrs, shape: tuple[int, ...]) -> bool:
    """onnxruntime copies the input when the output has its shape, whatever the scales."""
    return all(_axis_geometry(attrs, axis, size)[0] == size for axis, size in enumerate(shape))


def _linear_taps(attrs: Attrs, axis: int, size_in: int):
    """Per output position of one axis: the two source indices and their weights ``(i1, i2,
    d1, d2)``: ``d2`` weighs ``i1`` and ``d1`` weighs ``i2`` (onnxruntime's dx1/dx2)."""
    size_out, scale = _axis_geometry(attrs, axis, size_in)
    if attrs["sizes"]:  # onnxruntime divides the sizes in float32
        scale = float(np.float32(size_out) / np.float32(size_in))
    mode = attrs["coordinate_transformation_mode"]
    # onnxruntime takes the coordinate as is where the scale is 1
    orig = (
        np.arange(size_out, dtype=np.float32)
        if scale == 1.0
        else source_coordinate(mode, size_in, size_out, scale)
    )
    orig = np.clip(orig, np.float32(0), np.float32(size_in - 1))
    i1 = np.minimum(orig.astype(np.intp), size_in - 1)
    i2 = np.minimum(i1 + 1, size_in - 1)
    d1 = np.abs(orig - i1.astype(np.float32))
    d2 = np.abs(orig - i2.astype(np.float32))
    same = i1 == i2
    d1[same], d2[same] = 0.5, 0.5
    return i1, i2, d1, d2


def _run_linear(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """Bilinear resize of H and W (module docstring), every pixel at once."""
    y1, y2, dy1, dy2 = _linear_taps(attrs, 2, x.shape[2])
    dy1, dy2 = dy1[:, None], dy2[:, None]  # rows weigh along H, columns along W
    x1, x2, dx1, dx2 = _linear_taps(attrs, 3, x.shape[3])
    top, bottom = x[:, :, y1, :], x[:, :, y2, :]
    # onnxruntime: dx2*dy2*X11 + dx1*dy2*X21 + dx2*dy1*X12 + dx1*dy1*X22, left to right
    out = (dx2 * dy2) * top[..., x1]
    out = out + (dx1 * dy2) * top[..., x2]
    out = out + (dx2 * dy1) * bottom[..., x1]
    out = out + (dx1 * dy1) * bottom[..., x2]
    return np.ascontiguousarray(out, dtype=np.float32)


def _run_resize(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    if _same_shape(attrs, x.shape):
        return [x.copy()]
    if attrs.get("mode", "nearest") == "linear":
        return [_run_linear(attrs, x)]
    for axis, size_in in enumerate(x.shape):
        size_out, scale = _axis_geometry(attrs, axis, size_in)
        if size_out == size_in and scale == 1.0:
            continue
        index = source_index(
            attrs["coordinate_transformation_mode"],
            attrs["nearest_mode"],
            size_in,
            size_out,
            scale,
        )
        x = np.take(x, index, axis=axis)
    return [np.ascontiguousarray(x)]


register("Resize", _infer_resize, _run_resize)
