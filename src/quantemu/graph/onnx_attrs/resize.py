"""Normalizers of Resize and Upsample in nearest and linear mode: full-rank ``scales`` or
``sizes`` (the kernel is in :mod:`quantemu.graph.ops.resize`; Upsample becomes a Resize)."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node, TensorInfo
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer
from quantemu.graph.ops._spec import known
from quantemu.graph.ops.resize import COORDINATE_MODES, LINEAR_COORDINATE_MODES, NEAREST_MODES

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


def _supported_mode(raw: RawNode, mode: str) -> None:
    raw.require(
        mode in ("nearest", "linear"),
        f"mode {mode!r} is not supported; quantemu supports Resize/Upsample with mode "
        f"'nearest' (coordinate_transformation_mode one of {', '.join(COORDINATE_MODES)}; "
        f"nearest_mode one of {', '.join(NEAREST_MODES)}) and 'linear' (2-D, on H and W; "
        f"coordinate_transformation_mode one of {', '.join(LINEAR_COORDINATE_MODES)})",
    )


@normalizer("Resize")
def _resize(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(_RESIZE_ATTRS)
    mode = raw.attrs.get("mode", "nearest")
    _supported_mode(raw, mode)
    if ctx.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates, floor when upsampling
        scales = ctx.const(raw, 1, "scales")
        return _legacy_upsample(raw, ctx, scales, mode)
    coord = raw.attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = raw.attrs.get("nearest_mode", "round_prefer_floor")
    coords = COORDINATE_MODES if mode == "nearest" else LINEAR_COORDINATE_MODES
    raw.require(
        coord in coords,
        f"coordinate_transformation_mode {coord!r} is not "
        f"supported in {mode} mode; supported: {', '.join(coords)}",
    )
    raw.require(
        nearest in NEAREST_MODES,
        f"nearest_mode {nearest!r} is not supported; supported: {', '.join(NEAREST_MODES)}",
    )
    raw.require(not int(raw.attrs.get("antialias", 0)), "antialias=1 is not supported")
    attrs = _scales_or_sizes(raw, ctx)
    if mode == "linear":
        _check_linear_axes(raw, ctx, attrs)
    attrs.update(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest)
    return raw.make(raw.inputs[:1], attrs)


def _check_linear_axes(raw: RawNode, ctx: Context, attrs: dict) -> None:
    """Linear mode is onnxruntime's bilinear: H and W of an NCHW tensor, N and C kept."""
    x = ctx.info(raw)
    kept = (
        attrs["scales"][:2] == (1.0, 1.0)
        if attrs["scales"]
        else tuple(attrs["sizes"][:2]) == tuple(x.shape[:2])
    )
    raw.require(
        x.rank == 4 and kept,
        f"linear mode on input {x.shape} with scales {attrs['scales'] or '()'} / sizes "
        f"{attrs['sizes'] or '()'}: quantemu resizes linearly H and W of an NCHW (4-D) tensor "
        "only (bilinear), with N and C unchanged",
    )


def _scales_or_sizes(raw: RawNode, ctx: Context) -> dict:
    """Resize-11+'s ``scales`` or ``sizes`` input (exactly one), over every axis of X."""
    scales, sizes = ctx.const(raw, 2, "scales"), ctx.const(raw, 3, "sizes")
    scales = None if scales is None or scales.size == 0 else scales
    sizes = None if sizes is None or sizes.size == 0 else sizes
    if (scales is None) == (sizes is None):
        raise InvalidInputError(f"{raw}: exactly one of scales and sizes must be given")
    policy = raw.attrs.get("keep_aspect_ratio_policy", "stretch")
    raw.require(
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
        return {"scales": tuple(full_scales), "sizes": ()}
    return {"scales": (), "sizes": _full_sizes(raw, x, axes, given)}


def _full_sizes(raw: RawNode, x: TensorInfo, axes: list[int], given: list) -> tuple[int, ...]:
    raw.require(
        all(known(d) for d in x.shape[1:]),
        f"sizes need a known input shape, got {x.shape}",
    )
    full_sizes = list(x.shape)
    for axis, value in zip(axes, given, strict=True):
        full_sizes[axis] = int(value)
    raw.require(known(full_sizes[0]), "sizes must include the batch axis when it is symbolic")
    return tuple(full_sizes)


@normalizer("Upsample")
def _upsample(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"mode", "scales"})
    mode = raw.attrs.get("mode", "nearest")
    _supported_mode(raw, mode)
    if "scales" in raw.attrs:
        scales = np.asarray(raw.attrs["scales"], dtype=np.float32)
    else:
        scales = ctx.const(raw, 1, "scales")
    return _legacy_upsample(raw, ctx, scales, mode)


def _legacy_upsample(raw: RawNode, ctx: Context, scales, mode: str) -> Node:
    """Upsample and Resize-10: asymmetric coordinates (rounded down in nearest mode)."""
    x = ctx.info(raw)
    if scales is None or scales.size != x.rank:
        raise InvalidInputError(f"{raw}: scales must have one entry per axis of {x.shape}")
    values = tuple(float(s) for s in scales.reshape(-1))
    if mode == "linear":
        attrs = {"scales": values, "sizes": ()}
        _check_linear_axes(raw, ctx, attrs)
        attrs.update(
            mode="linear", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        )
        return Node(raw.name, "Resize", raw.inputs[:1], raw.outputs[:1], attrs)
    # onnxruntime rounds up instead when an axis is downsampled; we support upsampling only.
    raw.require(
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
