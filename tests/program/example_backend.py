"""The worked example of ARCHITECTURE.md: a whole backend in one file.

``toy`` stores every tensor as symmetric int8 (``scale = max|x| / 127``), moves Flatten's codes
unchanged (exact: no arithmetic) and runs everything else as a float fallback. It is
what a new backend writes: its options, its context, its rules and layers, its spec; and the
one registration line, :func:`register`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from quantemu.backends.registry import BackendSpec, register_backend
from quantemu.program import LayerOutput, LinearEncoding, LoweredModel, QTensor
from quantemu.program.fallback import FloatFallbackLayer, node_constants
from quantemu.program.layer import Layer
from quantemu.program.lowering import LoweringContext, NotLowerable, RuleTable
from quantemu.program.options import LoweringOptions


@dataclass(frozen=True)
class ToyOptions(LoweringOptions):
    """``exact_flatten``: move Flatten's codes unchanged (True) or run it in float (False)."""

    backend: ClassVar[str] = "toy"

    exact_flatten: bool = True


@dataclass
class ToyContext(LoweringContext):
    """Derives each tensor's int8 encoding from its calibrated range, once."""

    backend: ClassVar[str] = "toy"

    def encoding(self, name: str) -> LinearEncoding:
        if name not in self.encodings:
            low, high = self.ranges[name]
            amax = max(abs(float(np.min(low))), abs(float(np.max(high)))) or 1.0
            self.encodings[name] = LinearEncoding(scale=amax / 127, dtype="int8")
        return self.encodings[name]


@dataclass(frozen=True, kw_only=True)
class FlattenLayer(Layer):
    """The codes, reshaped to (batch, features): no arithmetic, so exact."""

    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        codes = inputs[0].codes
        return LayerOutput(QTensor(codes.reshape(codes.shape[0], -1), self.encoding))


def lower_flatten(ctx: ToyContext, node) -> Layer:
    if not ctx.options.exact_flatten:
        raise NotLowerable("exact_flatten=False")
    if node.attrs["axis"] != 1:
        raise NotLowerable(f"axis {node.attrs['axis']}: only axis 1 keeps the batch")
    # The output keeps the input's encoding: the codes move unchanged.
    encoding = ctx.encodings[node.outputs[0]] = ctx.encoding(node.inputs[0])
    return ctx.layer(FlattenLayer, node, op="flatten", encoding=encoding)


def lower_float(ctx: ToyContext, node, why: str) -> Layer:
    for name in ctx.data_inputs(node):
        ctx.encoding(name)
    return ctx.layer(
        FloatFallbackLayer,
        node,
        op=f"float:{node.op_type}",
        exact=False,
        note=why or f"{node.op_type} runs in float",
        node=node,
        encoding=ctx.encoding(node.outputs[0]),
        constants=node_constants(ctx.graph.initializers, node),
    )


FLOAT_OPS = ("Add", "AveragePool", "Conv", "Gemm", "MaxPool", "Relu", "Softmax")
RULES = RuleTable(
    rules={"Flatten": lower_flatten},
    fallback=lower_float,
    fallback_ops=dict.fromkeys(FLOAT_OPS, ""),
)


def header(options: ToyOptions) -> dict[str, str]:
    return {"target": "toy int8", **options.describe()}


def lower(graph, ranges, options: ToyOptions) -> LoweredModel:
    ctx = ToyContext(graph, ranges, ToyOptions.checked(options))  # typed options only
    inputs = {info.name: ctx.encoding(info.name) for info in graph.inputs}
    return LoweredModel("toy", inputs, RULES.lower_graph(ctx), header(options))


BACKEND = BackendSpec(
    name="toy",
    target="a toy int8 target (ARCHITECTURE.md's worked example)",
    scheme="symmetric per-tensor int8, scale max|x| / 127",
    options=ToyOptions,
    lower=lower,
    header=header,
)


def register() -> None:
    """The registration line (in quantemu, an entry in ``backends/catalog.py``)."""
    register_backend(BACKEND)
