"""Operators xcore-opt 1.4.2 keeps as TFLite builtins and then fails to compile: no XMOS
runtime has their kernels, so the model cannot run on XS3 with this toolchain (the ``tflite``
backend runs them)."""

from __future__ import annotations

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.graph.ir import Node
from quantemu.program import Layer
from quantemu.program.lowering import NotLowerable


def refuse_gelu(ctx: TfliteContext, node: Node) -> Layer:
    """Gelu: xcore-opt 1.4.2 keeps TFLite's GELU, then fails ("Could not set up compiler":
    its TFLite-Micro build has no GELU kernel); XMOS's host interpreter has none either."""
    raise NotLowerable(
        "xcore-opt 1.4.2 keeps GELU as a TFLite builtin and then fails to compile the model "
        "(\"Didn't find op for builtin opcode 'GELU'\"); neither it nor XMOS's runtime has a "
        "GELU kernel. Remedy: an activation xcore-opt tabulates (Relu, HardSwish, Sigmoid, Tanh), "
        "or the tflite backend, which runs LiteRT's GELU"
    )


def refuse_batch_matmul(ctx: TfliteContext, node: Node) -> Layer:
    """MatMul of two activations: TFLite's BATCH_MATMUL, which xcore-opt 1.4.2 keeps as a
    builtin and then fails on ("Could not set up compiler"): neither its TFLite-Micro build nor
    XMOS's host interpreter registers a BATCH_MATMUL kernel (tests/data/batch_matmul)."""
    raise NotLowerable(
        f"both operands ({node.inputs[0]}, {node.inputs[1]}) are activations: TFLite's "
        "BATCH_MATMUL, which xcore-opt 1.4.2 keeps as a TFLite builtin and then fails to compile "
        "(\"Didn't find op for builtin opcode 'BATCH_MATMUL'\"); XMOS's runtime has no "
        "BATCH_MATMUL kernel either. Remedy: the tflite backend (runtime 'tflite_micro' or "
        "'litert_reference'), which runs BATCH_MATMUL"
    )


__all__ = ["refuse_batch_matmul", "refuse_gelu"]
