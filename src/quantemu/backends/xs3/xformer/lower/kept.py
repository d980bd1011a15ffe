"""Which convolutions xcore-opt 1.4.2 keeps as TFLite builtins, and the ones it cannot build.

xcore-opt rewrites a convolution in three steps (``xformer/Transforms``):

1. ``OptimizeConv2D.cpp`` pads channels to a multiple of 4: a CONV_2D's input and output
   (``PadConv2DInputPattern``, ``PadConv2DOutputPattern``) and a FULLY_CONNECTED's after
   ``ReplaceFCWithConv2D`` makes it a 1x1 CONV_2D, always; a DEPTHWISE_CONV_2D's only when its
   input and output depths are equal (``PadTo4DepthwiseConv2DPattern``: depth multiplier 1).
2. ``ConvPatterns.td`` turns them into ``XC_FakeConv2D`` / ``XC_FakeDepthwiseConv2D`` only
   when the input and output depths are multiples of 4 (``HasMultipleOfNBytesPerPixel<4>``),
   the filter is a constant, a CONV_2D's filter depth equals its input depth
   (``HasEqualChannels``: no grouped convolution) and a DEPTHWISE_CONV_2D has a bias.
3. ``ReplaceConv2D.cpp`` builds ``XC_conv2d_v2``, unless the output transform's error exceeds
   ``--xcore-conv-err-threshold`` (:mod:`.conv`); whatever is left reverts to the builtin
   (``ConvRevertPatterns.td``), run by XMOS's TFLite-Micro.

So a depthwise convolution with a depth multiplier above 1 on a depth that is not a multiple
of 4 (one input channel, depth multiplier 8, as in keyword-spotting front ends) stays
DEPTHWISE_CONV_2D: :func:`kept_builtin` says so and the rule runs TFLite-Micro's kernel.
Two cases xcore-opt does not build correctly are refused (NotLowerable), each checked on
xmos-ai-tools 1.4.2 (``tests/data/xformer_kept``): a depthwise convolution without a bias stays
a builtin that xcore-opt's own TFLite-Micro then aborts on while sizing the arena
(``DepthwiseConvPrepare``); one with a depth multiplier above 1 on a depth that is a multiple
of 4 becomes an ``XC_conv2d_v2`` whose ``ReplaceDepthwiseConv2DPattern`` lays out the filter
for the input depth only (``filterShape = {1, H, W, inputDepth}``), and XMOS's interpreter's
outputs are then unrelated to the convolution's (up to 255 codes from TFLite's).
"""

from __future__ import annotations

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.graph.ir import Node
from quantemu.program.lowering import NotLowerable


def _depthwise_geometry(ctx: TfliteContext, node: Node) -> tuple[int, int] | None:
    """``(input channels, depth multiplier)`` of a depthwise Conv node, else None."""
    if node.op_type != "Conv":
        return None
    c_in = ctx.shape(node.inputs[0])[1]
    group = int(node.attrs["group"])
    w_shape = ctx.constant(node, 1, "weight").shape
    if group == 1 and c_in == 1 and _from_tflite_depthwise(ctx, node):
        return 1, w_shape[0]
    if group == 1 or group != c_in or w_shape[1] != 1:
        return None
    return c_in, w_shape[0] // c_in


def _from_tflite_depthwise(ctx: TfliteContext, node: Node) -> bool:
    """Whether ``node`` is a TFLite file's DEPTHWISE_CONV_2D. On one input channel it is a
    group-1 Conv in the IR, like a CONV_2D; the importer names each node after its TFLite
    operator (``depthwise_conv_2d_<index>``), the only trace of which builtin it was."""
    tflite = ctx.graph.metadata.get("source_format") == "tflite"
    return tflite and node.name.startswith("depthwise_conv_2d_")


def _compiled(ctx: TfliteContext) -> bool:
    """Whether the graph is a model xcore-opt compiled (it holds XC_ custom operators)."""
    return any(n.op_type == "TfliteCustom" for n in ctx.graph.nodes)


def kept_builtin(ctx: TfliteContext, node: Node) -> str | None:
    """Why xcore-opt 1.4.2 keeps ``node`` (Conv/Gemm/MatMul) as the TFLite builtin (the note
    of its TFLite-Micro layer), or None; NotLowerable where xcore-opt cannot build it."""
    if _compiled(ctx):  # a builtin convolution in a compiled model is one xcore-opt kept
        return "kept as a TFLite builtin by xcore-opt (in the compiled model)"
    _refuse(ctx, node)
    found = _depthwise_geometry(ctx, node)
    if found is None:
        return None
    c_in, multiplier = found
    if multiplier > 1 and c_in % 4:
        return (
            f"xcore-opt keeps it as TFLite's DEPTHWISE_CONV_2D: depth multiplier {multiplier} "
            f"on {c_in} input channel(s), not a multiple of 4 (it pads only depth multiplier 1)"
        )
    return None


def _refuse(ctx: TfliteContext, node: Node) -> None:
    """Raise NotLowerable for a convolution xcore-opt 1.4.2 cannot build (module docstring)."""
    found = _depthwise_geometry(ctx, node)
    if found is None:
        return
    c_in, multiplier = found
    no_bias = len(node.inputs) < 3 or not node.inputs[2]
    # TensorFlow's converter gives every convolution a bias: only a TFLite file can lack one
    if no_bias and ctx.graph.metadata.get("source_format") == "tflite":
        raise NotLowerable(
            "a depthwise convolution without a bias: xcore-opt 1.4.2 keeps it as TFLite's "
            "DEPTHWISE_CONV_2D and then aborts in its TFLite-Micro's DepthwiseConvPrepare "
            "(MicroAllocator::DeallocateTempTfLiteTensor) while sizing the arena. Remedy: give "
            "the layer a bias (zeros), as TensorFlow's converter does"
        )
    if multiplier > 1 and not c_in % 4:
        raise NotLowerable(
            f"a depthwise convolution with depth multiplier {multiplier} on {c_in} input "
            "channels: xcore-opt 1.4.2 builds an XC_conv2d_v2 whose filter is laid out for the "
            f"{c_in} input channels only, and XMOS's interpreter then computes values unrelated "
            "to the convolution (up to 255 codes from TFLite's), which quantemu does not "
            "emulate. Remedy: depth multiplier 1 (a 1x1 Conv to widen the channels first), or "
            "the tflite backend"
        )


__all__ = ["kept_builtin"]
