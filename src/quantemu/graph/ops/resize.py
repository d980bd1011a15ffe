"""Resize (and the older Upsample, imported as Resize) in ``nearest`` mode.

Normalized attributes: ``mode="nearest"``, ``coordinate_transformation_mode``, ``nearest_mode``,
and either ``scales`` (one float per axis) or ``sizes`` (one int per axis); the other is ``()``.

Each output coordinate is mapped back to the input with the coordinate transformation, in
float32 as onnxruntime computes it, rounded by ``nearest_mode`` and clamped into the input; the
output is one gather per resized axis.
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


def _infer_resize(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    scales, sizes = node.attrs["scales"], node.attrs["sizes"]
    target = sizes or scales
    if len(target) != x.rank:
        raise fail(node, f"{'sizes' if sizes else 'scales'} {target} do not match rank {x.rank}")
    if sizes:
        return [tuple(int(s) for s in sizes)]
    out = []
    for dim, scale in zip(x.shape, scales, strict=True):
        if scale <= 0:
            raise fail(node, f"scales {scales} must be positive")
        if scale == 1.0:
            out.append(dim)
        else:
            out.append(int(np.floor(dim * scale)) if known(dim) else "?")
    return [tuple(out)]


def source_index(mode: str, rounding: str, size_in: int, size_out: int, scale: float):
    """For each output position along an axis, the input position nearest mode reads."""
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
        orig = offset + (x + half) / s - half
    elif mode == "align_corners":
        ratio = np.float32(size_in - 1) / np.float32(size_out - 1) if size_out > 1 else 0
        orig = x * np.float32(ratio)
    elif mode == "asymmetric":
        orig = x / s
    else:  # tf_half_pixel_for_nn
        orig = (x + half) / s
    if rounding == "round_prefer_floor":
        index = np.ceil(orig - half)
    elif rounding == "round_prefer_ceil":
        index = np.floor(orig + half)
    elif rounding == "floor":
        index = np.floor(orig)
    else:
        index = np.ceil(orig)
    return np.clip(index, 0, size_in - 1).astype(np.intp)


def _run_resize(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = inputs[0]
    sizes, scales = attrs["sizes"], attrs["scales"]
    for axis, size_in in enumerate(x.shape):
        if sizes:
            size_out = int(sizes[axis])
            scale = size_out / size_in
        else:
            scale = scales[axis]
            size_out = int(np.floor(size_in * scale))
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
