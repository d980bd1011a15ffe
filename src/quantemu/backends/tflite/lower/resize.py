"""``tflite`` layer and rule of Resize: RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR
(:mod:`quantemu.backends.tflite.resize`), on the input's quantization (same-scale operators).

TFLite resizes H and W only, with two flags, ``align_corners`` and ``half_pixel_centers``, the
way a converter writes ONNX's coordinate modes: ``align_corners`` -> align_corners,
``half_pixel`` (and ``pytorch_half_pixel``, ``tf_half_pixel_for_nn``) -> half_pixel_centers,
``asymmetric`` -> neither.

Nearest mode: ONNX's ``nearest_mode`` rounds ties its own way (``round_prefer_floor`` by
default), which TFLite's ``floor`` / ``round`` can only sometimes give. The rule therefore
compares, per axis, the source index of every output position the graph reads
(:func:`quantemu.graph.ops.resize.source_index`) with the kernel's, and takes the first flag
pair, the coordinate mode's own first, that reads the same pixels; a resize no pair
reproduces is refused, naming the positions. The program then computes what the ONNX graph
says, pixel for pixel.

Linear mode: the kernel interpolates in Q10 fixed point, so it approximates ONNX's float
interpolation by construction; the rule maps the coordinate mode to the flags (the modes
above) and refuses the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.resize import (
    ResizeParams,
    nearest_source,
    resize_bilinear,
    resize_nearest,
)
from quantemu.graph.ir import Node
from quantemu.graph.ops.resize import source_index
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import NotLowerable

#: ONNX coordinate mode -> TFLite's (align_corners, half_pixel_centers).
_FLAGS = {
    "align_corners": (True, False),
    "half_pixel": (False, True),
    "pytorch_half_pixel": (False, True),
    "tf_half_pixel_for_nn": (False, True),
    "asymmetric": (False, False),
}
#: Every flag pair RESIZE_NEAREST_NEIGHBOR takes.
ALL_FLAGS = ((False, False), (True, False), (False, True), (True, True))


@dataclass(frozen=True, eq=False, kw_only=True)
class ResizeLayer(Layer):
    """RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR of NCHW codes, quantization kept."""

    params: ResizeParams
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The reference kernel (no counters: nothing is clamped or lost)."""
        kernel = resize_bilinear if self.params.bilinear else resize_nearest
        y = kernel(np.asarray(inputs[0].codes), self.params)
        return LayerOutput(QTensor(y, self.encoding), {})


def _geometry(ctx: TfliteContext, node: Node) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((H, W), (OH, OW))``, the node refused unless it resizes only H and W of a 4-D
    tensor of known size."""
    shape_in, shape_out = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    if len(shape_in) != 4:
        raise NotLowerable(f"a {len(shape_in)}-D input (TFLite resizes NHWC images)")
    if tuple(shape_in[1:2]) != tuple(shape_out[1:2]) or shape_out[0] != shape_in[0]:
        raise NotLowerable(f"resizes N or C ({shape_in} -> {shape_out}); TFLite resizes H, W")
    dims = (*shape_in[2:], *shape_out[2:])
    if not all(isinstance(d, int) for d in dims):
        raise NotLowerable(f"unknown spatial sizes ({shape_in} -> {shape_out})")
    return (dims[0], dims[1]), (dims[2], dims[3])


def _axis_scales(node: Node, size_in, size_out) -> tuple[float, float]:
    """The scale ONNX maps H and W coordinates with (as the graph's kernel takes it)."""
    scales = node.attrs["scales"]
    if scales:
        return float(scales[2]), float(scales[3])
    return size_out[0] / size_in[0], size_out[1] / size_in[1]


def _nearest_flags(node: Node, size_in, size_out, pairs) -> tuple[bool, bool]:
    """The first flag pair of ``pairs`` whose kernel reads the pixels the ONNX node reads
    (module docstring)."""
    mode, rounding = node.attrs["coordinate_transformation_mode"], node.attrs["nearest_mode"]
    wanted = [
        source_index(mode, rounding, i, o, s)
        for i, o, s in zip(size_in, size_out, _axis_scales(node, size_in, size_out), strict=True)
    ]
    first = _FLAGS.get(mode)
    for flags in (first, *pairs) if first in pairs else pairs:
        got = [nearest_source(i, o, *flags) for i, o in zip(size_in, size_out, strict=True)]
        if all(np.array_equal(g, w) for g, w in zip(got, wanted, strict=True)):
            return flags
    raise NotLowerable(
        f"nearest resize {size_in} -> {size_out} with {mode!r} and {rounding!r} reads source "
        f"rows {wanted[0].tolist()} and columns {wanted[1].tolist()}, which no "
        f"RESIZE_NEAREST_NEIGHBOR (align_corners, half_pixel_centers) of {list(pairs)} gives"
    )


def resize_rule(nearest_pairs=ALL_FLAGS):
    """The Resize rule of a target whose runtime computes RESIZE_NEAREST_NEIGHBOR as these
    flag pairs say (xs3: XMOS's runtime ignores ``half_pixel_centers``)."""

    def lower_resize(ctx: TfliteContext, node: Node) -> Layer:
        """Resize (nearest or linear, H and W): RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR."""
        size_in, size_out = _geometry(ctx, node)
        mode = node.attrs.get("mode", "nearest")
        if mode == "nearest":
            align, half = _nearest_flags(node, size_in, size_out, nearest_pairs)
        elif mode == "linear":
            align, half = _linear_flags(node)
        else:
            raise NotLowerable(f"mode {mode!r} (TFLite resizes nearest or bilinear)")
        params = ResizeParams(size_out, align, half, bilinear=mode == "linear")
        enc = ctx.same_as_input(node)
        return ctx.layer(ResizeLayer, node, op=params.op, params=params, encoding=enc)

    return lower_resize


def _linear_flags(node: Node) -> tuple[bool, bool]:
    coord = node.attrs["coordinate_transformation_mode"]
    if coord not in _FLAGS or coord == "tf_half_pixel_for_nn":
        supported = ", ".join(c for c in _FLAGS if c != "tf_half_pixel_for_nn")
        raise NotLowerable(f"linear resize with {coord!r} (RESIZE_BILINEAR: {supported})")
    return _FLAGS[coord]


#: The ``tflite`` backend's Resize rule (both runtimes honour every flag pair).
lower_resize = resize_rule()
