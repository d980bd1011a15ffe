"""The ``XC_lookup`` xcore-opt splits out of an XC op's fused activation.

The XC ops have no activation stage: ``TFLPatterns.td`` unfuses a RELU / RELU6 from an ADD,
SUB or MUL unconditionally (an ``XC_lookup`` on the op's output quantization, whatever its zero
point, :func:`binary_table`), and from a convolution only when the activation bites, that is
when the output zero point is not -128 (:func:`conv_table`). The layer then looks its codes up
in the table (:func:`looked_up`).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.xs3.xformer.lookup import lookup8, lookup_table_int8
from quantemu.graph.ir import Node
from quantemu.program import LinearEncoding
from quantemu.program.lowering import NotLowerable


def looked_up(table: np.ndarray | None, y: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """``y`` after the split-out ``XC_lookup`` (none: unchanged), and the counters: how many
    codes the activation changed (``activation_clamped``)."""
    if table is None:
        return y, {}
    looked = lookup8(y, table)
    return looked, {"activation_clamped": int(np.count_nonzero(looked != y))}


def binary_table(node: Node, encoding: LinearEncoding) -> np.ndarray | None:
    """The ``XC_lookup`` of an ADD / SUB / MUL's fused RELU or RELU6, on ``encoding``."""
    kind = node.attrs.get("activation")
    if kind is None:
        return None
    s, z = encoding.scale, int(encoding.zero_point)
    if kind == "relu":
        return lookup_table_int8("relu", s, z, s, z)
    bounds = (float(node.attrs["activation_min"]), float(node.attrs["activation_max"]))
    if kind == "clip" and bounds == (0.0, 6.0):
        return lookup_table_int8("relu6", s, z, s, z)
    # RELU_N1_TO_1 would stay a TFLite op after the XC op: not modelled
    raise NotLowerable(
        f"fused activation {kind} {bounds} after {node.op_type} (xcore-opt has no XC_lookup for it)"
    )


def conv_table(node: Node, encoding: LinearEncoding) -> np.ndarray | None:
    """The ``XC_lookup`` of a convolution's fused ReLU / ReLU6 (a clip), on ``encoding``; none
    when the output zero point is -128 (the XC op only saturates: the activation is dropped)."""
    kind = node.attrs.get("activation")
    if kind is None or int(encoding.zero_point) == -128:
        return None
    s, z = encoding.scale, int(encoding.zero_point)
    if kind == "relu":
        return lookup_table_int8("relu", s, z, s, z)
    if kind == "clip":
        bounds = (float(node.attrs["activation_min"]), float(node.attrs["activation_max"]))
        return lookup_table_int8("clip", s, z, s, z, bounds=bounds)
    raise NotLowerable(f"fused activation {kind!r}")


__all__ = ["binary_table", "conv_table", "looked_up"]
