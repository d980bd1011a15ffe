"""Normalizers of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (the kernels are in
:mod:`quantemu.graph.ops.pool`)."""

from __future__ import annotations

from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer, without_attributes
from quantemu.graph.onnx_attrs.conv import kernel_shape, spatial_attrs

normalizer("GlobalAveragePool", "GlobalMaxPool")(without_attributes)


@normalizer("MaxPool", "AveragePool")
def _pool(raw: RawNode, ctx: Context) -> Node:
    average = raw.op_type == "AveragePool"
    known_attrs = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "dilations"}
    known_attrs |= {"count_include_pad"} if average else {"storage_order"}
    raw.check_attrs(known_attrs)
    raw.require(
        int(raw.attrs.get("storage_order", 0)) == 0,
        "storage_order=1 (column-major indices) is not supported; only the pooled values are",
    )
    raw.single_output(ctx, "Indices")
    attrs = spatial_attrs(raw, ctx, kernel_shape(raw, ctx, None))
    attrs["ceil_mode"] = int(raw.attrs.get("ceil_mode", 0))
    if average:
        attrs["count_include_pad"] = int(raw.attrs.get("count_include_pad", 0))
    return raw.make(raw.inputs[:1], attrs)
