"""Normalizers of Gemm and MatMul (the kernels are in :mod:`quantemu.graph.ops.linear`)."""

from __future__ import annotations

from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer, without_attributes

normalizer("MatMul")(without_attributes)


@normalizer("Gemm")
def _gemm(raw: RawNode, ctx: Context) -> Node:
    raw.check_attrs({"alpha", "beta", "transA", "transB"})
    attrs = {
        "alpha": float(raw.attrs.get("alpha", 1.0)),
        "beta": float(raw.attrs.get("beta", 1.0)),
        "transA": int(raw.attrs.get("transA", 0)),
        "transB": int(raw.attrs.get("transB", 0)),
    }
    return raw.make([n for n in raw.inputs[:3] if n], attrs)
