"""Lower a graph onto TFLite's int8 reference kernels.

``lower(graph, ranges, options) -> LoweredModel`` (called by ``quantemu.compile(...,
backend="tflite")``). An int8 TFLite model keeps every parameter of its own; a float model is
quantized as TensorFlow's converter does (per-tensor asymmetric int8 activations, per-channel
symmetric int8 weights, int32 biases at ``s_in * s_w``; :mod:`quantemu.backends.tflite.quantize`).
The op -> rule table is :data:`.rules.RULES`; options: :class:`.options.Options`.
"""

from __future__ import annotations

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.options import KernelSet, Options
from quantemu.backends.tflite.lower.rules import RULES
from quantemu.graph.ir import Graph
from quantemu.program import LoweredModel

__all__ = ["RULES", "KernelSet", "Options", "TfliteContext", "header", "lower"]


def header(options: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (DESIGN principle 9)."""
    return {
        "target": "TFLite int8 reference kernels",
        "runtime": options.runtime.value,
        "kernels": options.kernels.value,
        "quantization": (
            "the model's own (int8 TFLite), else TensorFlow's converter: per-tensor asymmetric "
            "int8 activations, per-channel symmetric int8 weights, int32 bias"
        ),
        "rounding": "gemmlowp: doubling high multiply (ties up), divide by 2^n (ties away)",
    }


def lower(graph: Graph, ranges, options: Options | None = None) -> LoweredModel:
    """Lower an optimized ``graph`` with ``ranges`` and typed ``options`` onto TFLite's
    reference kernels."""
    opts = Options.checked(options)
    ctx = TfliteContext(graph, ranges, opts)
    input_encodings = {info.name: ctx.input_encoding(info.name) for info in graph.inputs}
    return LoweredModel("tflite", input_encodings, RULES.lower_graph(ctx), header(opts))
