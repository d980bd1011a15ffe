"""Normalizers of the layout, resize, softmax, reduction and dropout ops (see onnx_attrs)."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph import (  # noqa: F401  (registers them)
    onnx_attrs_index,
    onnx_attrs_more,
    onnx_attrs_recurrent,
)
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs import (
    Context,
    RawNode,
    check_attrs,
    make,
    normalizer,
    require,
    single_output,
)
from quantemu.graph.ops._spec import known
from quantemu.graph.ops.resize import COORDINATE_MODES, NEAREST_MODES


def _axis(raw: RawNode, axis: int, rank: int, *, inclusive: bool = False) -> int:
    limit = rank + 1 if inclusive else rank
    if not -rank <= axis < limit:
        raise InvalidInputError(f"{raw}: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


@normalizer("Flatten")
def _flatten(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"axis"})
    axis = _axis(raw, int(raw.attrs.get("axis", 1)), ctx.info(raw).rank, inclusive=True)
    return make(raw, raw.inputs[:1], {"axis": axis})


@normalizer("Reshape")
def _reshape(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"allowzero"})
    shape = ctx.const(raw, 1, "shape")
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise InvalidInputError(f"{raw}: the shape input must be a 1-D int64 constant")
    attrs = {"shape": tuple(int(s) for s in shape), "allowzero": int(raw.attrs.get("allowzero", 0))}
    return make(raw, raw.inputs[:1], attrs)


@normalizer("Transpose")
def _transpose(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"perm"})
    rank = ctx.info(raw).rank
    perm = tuple(int(p) for p in raw.attrs.get("perm", reversed(range(rank))))
    return make(raw, raw.inputs[:1], {"perm": perm})


@normalizer("Concat")
def _concat(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"axis"})
    if "axis" not in raw.attrs:
        raise InvalidInputError(f"{raw}: attribute axis is required")
    axis = _axis(raw, int(raw.attrs["axis"]), ctx.info(raw).rank)
    return make(raw, raw.inputs, {"axis": axis})


@normalizer("Softmax")
def _softmax(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"axis"})
    rank = ctx.info(raw).rank
    legacy = ctx.opset < 13
    axis = _axis(raw, int(raw.attrs.get("axis", 1 if legacy else -1)), rank)
    # Before opset 13 Softmax flattens to 2-D at axis; that is the same as a softmax over the
    # last axis when axis is the last axis.
    return make(raw, raw.inputs[:1], {"axis": axis, "coerce_2d": int(legacy and axis != rank - 1)})


@normalizer("ReduceMean")
def _reduce_mean(raw: RawNode, ctx: Context) -> Node:
    rank = ctx.info(raw).rank
    if ctx.opset < 18:
        check_attrs(raw, {"axes", "keepdims"})
        axes = raw.attrs.get("axes", ())
        noop = 0
    else:
        check_attrs(raw, {"keepdims", "noop_with_empty_axes"})
        value = ctx.const(raw, 1, "axes")
        axes = () if value is None else value.reshape(-1).tolist()
        noop = int(raw.attrs.get("noop_with_empty_axes", 0))
    if not axes and noop:
        return Node(raw.name, "Identity", raw.inputs[:1], raw.outputs[:1], {})
    axes = tuple(sorted({_axis(raw, int(a), rank) for a in axes})) or tuple(range(rank))
    keepdims = int(raw.attrs.get("keepdims", 1))
    if keepdims not in (0, 1):  # onnxruntime keeps only for 1: other values are ambiguous
        raise InvalidInputError(f"{raw}: keepdims {keepdims} must be 0 or 1")
    return make(raw, raw.inputs[:1], {"axes": axes, "keepdims": keepdims})


@normalizer("Dropout")
def _dropout(raw: RawNode, ctx: Context) -> Node:
    single_output(raw, ctx, "mask")
    if ctx.opset < 12:
        check_attrs(raw, {"ratio"})
    else:
        check_attrs(raw, {"seed"})
        training = ctx.const(raw, 2, "training_mode")
        require(
            raw,
            training is None or not bool(training.reshape(-1)[0]),
            "training_mode=true is not supported; quantemu imports inference graphs",
        )
    return make(raw, raw.inputs[:1], {})


# -- Resize / Upsample -----------------------------------------------------------------------

_RESIZE_ATTRS = {
    "mode",
    "coordinate_transformation_mode",
    "nearest_mode",
    "cubic_coeff_a",
    "exclude_outside",
    "extrapolation_value",
    "antialias",
    "axes",
    "keep_aspect_ratio_policy",
}


def _nearest_only(raw: RawNode, mode: str) -> None:
    require(
        raw,
        mode == "nearest",
        f"mode {mode!r} is not supported; quantemu supports Resize/"
        f"Upsample with mode 'nearest' (coordinate_transformation_mode one of "
        f"{', '.join(COORDINATE_MODES)}; nearest_mode one of {', '.join(NEAREST_MODES)})",
    )


@normalizer("Resize")
def _resize(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, _RESIZE_ATTRS)
    _nearest_only(raw, raw.attrs.get("mode", "nearest"))
    if ctx.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates, floor when upsampling
        scales = ctx.const(raw, 1, "scales")
        return _legacy_upsample(raw, ctx, scales)
    coord = raw.attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = raw.attrs.get("nearest_mode", "round_prefer_floor")
    require(
        raw,
        coord in COORDINATE_MODES,
        f"coordinate_transformation_mode {coord!r} is not "
        f"supported in nearest mode; supported: {', '.join(COORDINATE_MODES)}",
    )
    require(
        raw,
        nearest in NEAREST_MODES,
        f"nearest_mode {nearest!r} is not supported; supported: {', '.join(NEAREST_MODES)}",
    )
    require(raw, not int(raw.attrs.get("antialias", 0)), "antialias=1 is not supported")
    scales, sizes = ctx.const(raw, 2, "scales"), ctx.const(raw, 3, "sizes")
    scales = None if scales is None or scales.size == 0 else scales
    sizes = None if sizes is None or sizes.size == 0 else sizes
    if (scales is None) == (sizes is None):
        raise InvalidInputError(f"{raw}: exactly one of scales and sizes must be given")
    policy = raw.attrs.get("keep_aspect_ratio_policy", "stretch")
    require(
        raw,
        sizes is None or policy == "stretch",
        f"keep_aspect_ratio_policy {policy!r} is not supported; only 'stretch'",
    )
    x = ctx.info(raw)
    axes = [int(a) % x.rank for a in raw.attrs.get("axes", range(x.rank))]
    given = (scales if sizes is None else sizes).reshape(-1).tolist()
    if len(given) != len(axes):
        raise InvalidInputError(f"{raw}: {len(given)} scales/sizes for {len(axes)} axes")
    if sizes is None:
        full_scales = [1.0] * x.rank
        for axis, value in zip(axes, given, strict=True):
            full_scales[axis] = float(value)
        attrs = {"scales": tuple(full_scales), "sizes": ()}
    else:
        require(
            raw,
            all(known(d) for d in x.shape[1:]),
            f"sizes need a known input shape, got {x.shape}",
        )
        full_sizes = list(x.shape)
        for axis, value in zip(axes, given, strict=True):
            full_sizes[axis] = int(value)
        require(raw, known(full_sizes[0]), "sizes must include the batch axis when it is symbolic")
        attrs = {"scales": (), "sizes": tuple(full_sizes)}
    attrs.update(mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest)
    return make(raw, raw.inputs[:1], attrs)


@normalizer("Upsample")
def _upsample(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"mode", "scales"})
    _nearest_only(raw, raw.attrs.get("mode", "nearest"))
    if "scales" in raw.attrs:
        scales = np.asarray(raw.attrs["scales"], dtype=np.float32)
    else:
        scales = ctx.const(raw, 1, "scales")
    return _legacy_upsample(raw, ctx, scales)


def _legacy_upsample(raw: RawNode, ctx: Context, scales) -> Node:
    """Upsample and Resize-10 in nearest mode: asymmetric coordinates rounded down."""
    x = ctx.info(raw)
    if scales is None or scales.size != x.rank:
        raise InvalidInputError(f"{raw}: scales must have one entry per axis of {x.shape}")
    values = tuple(float(s) for s in scales.reshape(-1))
    # onnxruntime rounds up instead when an axis is downsampled; we support upsampling only.
    require(
        raw,
        min(values) >= 1.0,
        f"scales {values} downsample; quantemu supports the "
        "legacy Upsample/Resize-10 for upsampling only",
    )
    attrs = {
        "mode": "nearest",
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
        "scales": values,
        "sizes": (),
    }
    return Node(raw.name, "Resize", raw.inputs[:1], raw.outputs[:1], attrs)
