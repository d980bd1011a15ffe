"""The quantization table of ``quantemu inspect``: every node's integer parameters.

For a pre-quantized model (an int8 TFLite file, a QDQ ONNX model) one row per node: the
operator (the TFLite operator where the node came from one), the quantization of its data inputs
and of its output (scale, zero point, dtype), and of its weights and bias (per-channel scales as
their range and count).
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

from quantemu.graph.ir import Graph, QuantOverride


def describe_quant(ov: QuantOverride | None) -> str:
    """``s=0.0039 z=-128 int8``; per-axis: ``s=[1.2e-3..4e-3]x64 (axis 0) z=0 int8``."""
    if ov is None:
        return "float"
    scale = np.asarray(ov.scale, np.float64).reshape(-1)
    zero = np.asarray(ov.zero_point).reshape(-1)
    if scale.size == 1:
        return f"s={scale[0]:.6g} z={int(zero[0])} {ov.dtype}"
    zeros = f"z={int(zero[0])}" if np.all(zero == zero[0]) else "z=per-axis"
    return (
        f"s=[{scale.min():.3g}..{scale.max():.3g}]x{scale.size} (axis {ov.axis}) {zeros} {ov.dtype}"
    )


def quantization_table(graph: Graph) -> Table:
    """One row per node: operator, inputs', weights', bias' and output's quantization."""
    table = Table(title=f"{graph.name} · quantization (as the model gives it)")
    for column in ("#", "node", "op", "inputs", "weights", "bias", "output"):
        table.add_column(column, justify="right" if column == "#" else "left")
    ovs = graph.quant_overrides
    for i, node in enumerate(graph.nodes):
        data = [n for n in node.inputs if n and n not in graph.initializers]
        consts = [n for n in node.inputs if n in graph.initializers]
        weights = describe_quant(ovs.get(consts[0])) if consts else ""
        bias = describe_quant(ovs.get(consts[1])) if len(consts) > 1 else ""
        table.add_row(
            str(i),
            node.name,
            str(node.attrs.get("tflite_op", node.op_type)),
            "; ".join(describe_quant(ovs.get(n)) for n in data),
            weights,
            bias,
            "; ".join(describe_quant(ovs.get(n)) for n in node.outputs),
        )
    return table
