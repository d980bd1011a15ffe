"""Normalizers of Conv and ConvTranspose, and the spatial attributes every 2-D windowed op has
(kernel, strides, dilations, explicit pads; :mod:`.pool` uses them too). The kernels are in
:mod:`quantemu.graph.ops.conv`."""

from __future__ import annotations

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import BIND_HINT, Context, RawNode, normalizer
from quantemu.graph.ops._spec import known

_CONV = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}


def spatial_attrs(raw: RawNode, ctx: Context, kernel: tuple[int, ...], *, dilations=True):
    """kernel_shape, strides, dilations and explicit pads ``(top, left, bottom, right)``."""
    x = ctx.info(raw)
    raw.require(
        x.rank == 4 and len(kernel) == 2,
        f"only 2-D {raw.op_type} on NCHW input is "
        f"supported; input shape {x.shape}, kernel {kernel}",
    )
    strides = raw.ints("strides", (1, 1))
    dil = raw.ints("dilations", (1, 1)) if dilations else (1, 1)
    pads = raw.ints("pads", (0, 0, 0, 0))
    if len(strides) != 2 or len(dil) != 2 or len(pads) != 4:
        raise InvalidInputError(
            f"{raw}: strides {strides}, dilations {dil} or pads {pads} do not fit a 2-D kernel"
        )
    if min(kernel) < 1:
        raise InvalidInputError(f"{raw}: kernel {kernel} must be at least 1x1")
    if min(strides) < 1 or min(dil) < 1 or min(pads) < 0:
        raise InvalidInputError(
            f"{raw}: strides {strides} and dilations {dil} must be >= 1 and pads {pads} >= 0"
        )
    auto_pad = raw.attrs.get("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(raw, x.shape[2:], kernel, strides, dil, upper=auto_pad == "SAME_UPPER")
    elif auto_pad != "NOTSET":
        raise InvalidInputError(
            f"{raw}: auto_pad {auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"
        )
    return {"kernel_shape": tuple(kernel), "strides": strides, "dilations": dil, "pads": pads}


def _same_pads(raw, sizes, kernel, strides, dilations, *, upper: bool) -> tuple[int, ...]:
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        raw.require(
            known(size), f"auto_pad SAME needs known spatial sizes, input has {sizes}; {BIND_HINT}"
        )
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if upper else large)
        end.append(large if upper else small)
    return (*begin, *end)


def kernel_shape(raw: RawNode, ctx: Context, weight_index: int | None) -> tuple[int, ...]:
    """The ``kernel_shape`` attribute, else the weight's (input ``weight_index``) spatial shape."""
    if "kernel_shape" in raw.attrs:
        return raw.ints("kernel_shape", ())
    if weight_index is None:
        raise InvalidInputError(f"{raw}: attribute kernel_shape is required")
    return tuple(int(d) for d in ctx.info(raw, weight_index).shape[2:])


def _group(raw: RawNode) -> int:
    group = int(raw.attrs.get("group", 1))
    if group < 1:
        raise InvalidInputError(f"{raw}: group {group} must be >= 1 (1 for a plain convolution)")
    return group


@normalizer("Conv")
def _conv(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(_CONV)
    attrs = spatial_attrs(raw, ctx, kernel_shape(raw, ctx, 1))
    attrs["group"] = _group(raw)
    return raw.make([n for n in raw.inputs[:3] if n], attrs)


@normalizer("ConvTranspose")
def _conv_transpose(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs(_CONV | {"output_padding", "output_shape"})
    kernel = kernel_shape(raw, ctx, 1)
    explicit = {k: v for k, v in raw.attrs.items() if k != "auto_pad"}
    attrs = spatial_attrs(RawNode(**{**raw.__dict__, "attrs": explicit}), ctx, kernel)
    attrs["group"] = _group(raw)
    attrs["output_padding"] = raw.ints("output_padding", (0, 0))
    auto_pad = raw.attrs.get("auto_pad", "NOTSET")
    x = ctx.info(raw)
    if "output_shape" in raw.attrs or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = raw.ints("output_shape", ())[-2:] or tuple(
            d * s if known(d) else d for d, s in zip(x.shape[2:], attrs["strides"], strict=True)
        )
        attrs["pads"] = _transpose_pads(raw, x.shape[2:], wanted, attrs, auto_pad)
    elif auto_pad == "VALID":
        attrs["pads"] = (0, 0, 0, 0)
    return raw.make([n for n in raw.inputs[:3] if n], attrs)


def _transpose_pads(raw, sizes, wanted, attrs, auto_pad) -> tuple[int, ...]:
    """ONNX ConvTranspose: pads from output_shape (or SAME), ``total = s(in-1)+op+dk - out``."""
    begin, end = [], []
    for i, (size, out) in enumerate(zip(sizes, wanted, strict=True)):
        raw.require(known(size) and known(out), f"output_shape needs known sizes, got {sizes}")
        k, s, d = attrs["kernel_shape"][i], attrs["strides"][i], attrs["dilations"][i]
        total = s * (size - 1) + attrs["output_padding"][i] + (k - 1) * d + 1 - out
        raw.require(
            total >= 0,
            f"output_shape {wanted} is larger than the full transposed "
            "convolution; quantemu does not pad it further",
        )
        if auto_pad == "SAME_UPPER":
            begin.append(total // 2)
            end.append(total - total // 2)
        else:
            begin.append(total - total // 2)
            end.append(total // 2)
    return (*begin, *end)
