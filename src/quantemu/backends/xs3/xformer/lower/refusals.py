"""Operators xcore-opt 1.4.2 keeps as TFLite builtins and then fails to compile: no XMOS
runtime has their kernels, so the model cannot run on XS3 with this toolchain (the ``tflite``
backend runs them)."""

from __future__ import annotations

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.resize import resize_rule
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


def refuse_conv_transpose(ctx: TfliteContext, node: Node) -> Layer:
    """ConvTranspose: TFLite's TRANSPOSE_CONV, which xcore-opt 1.4.2 rewrites into XC_pad,
    XC_conv2d_v2 and XC_slice (8 of 8 single-op models,
    ``tests/backends/tflite/transpose_conv_peer_vectors.json``); that rewrite's output
    transform is not emulated (its codes differ from TFLite's kernel on up to 65% of the
    outputs), so xs3 refuses it rather than give TFLite's codes."""
    raise NotLowerable(
        "xcore-opt 1.4.2 rewrites TRANSPOSE_CONV into XC_pad, XC_conv2d_v2 and XC_slice, whose "
        "arithmetic quantemu does not emulate yet (its codes differ from TFLite's "
        "TRANSPOSE_CONV). Remedy: the tflite backend, which runs TRANSPOSE_CONV as LiteRT and "
        "TFLite-Micro do, or an upsampling xcore-opt keeps exact (Resize, then Conv)"
    )


#: Resize: xcore-opt 1.4.2 keeps RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR as builtins, and
#: XMOS's runtime runs them as TFLite-Micro does (42 single-op models, both ops, every flag pair:
#: ``tests/backends/tflite/resize_peer_vectors.json``), except that its RESIZE_NEAREST_NEIGHBOR
#: ignores ``half_pixel_centers`` (10 of 10 such models read the pixels of the flag unset).
#: A nearest resize therefore lowers only where a pair without that flag reads the pixels the
#: graph reads, and is refused (naming the pixels) elsewhere.
lower_xmos_resize = resize_rule(nearest_pairs=((False, False), (True, False)))


__all__ = ["lower_xmos_resize", "refuse_batch_matmul", "refuse_conv_transpose", "refuse_gelu"]
