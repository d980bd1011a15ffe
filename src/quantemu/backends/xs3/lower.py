"""Lower an optimized float graph onto XS3: TFLite int8 quantization, tflite2xcore's choices.

``lower(graph, ranges, **options) -> LoweredModel`` (called by ``quantemu.compile(...,
backend="xs3")``) quantizes the model the way XMOS's flow does (TFLite post-training int8, then
tflite2xcore's BSO derivation and operator choice) and returns one layer per graph node:

==========================================  ==================================================
graph op                                    XS3 layer
==========================================  ==================================================
Conv (group 1), 1x1 unit stride, no pads    ``conv2d_1x1``
Conv, ``K_w * C_in <= 32``, C_in 4/8/16/32  ``conv2d_shallowin``
Conv, depthwise (group = C_in = C_out)      ``conv2d_depthwise``
Conv, other                                 ``conv2d_deep``
Gemm, MatMul with constant 2-D weights      ``fully_connected_8``
MaxPool                                     ``maxpool2d`` / TFLite's reference (exact)
AveragePool                                 lib_nn ``avgpool2d`` (VALID, C % 4 == 0), else
                                            TFLite-Micro's reference (``exact=False``)
GlobalAveragePool, ReduceMean over H, W     lib_nn ``avgpool2d_global`` (C % 4 == 0)
Add, Sub                                    TFLite-Micro's reference ADD/SUB (``exact=False``)
Relu, Clip, Sigmoid, Tanh (standalone)      ``lookup8`` with tflite2xcore's table
Flatten, Reshape, Transpose, Identity       the same codes (exact)
Softmax, Mul, Concat, Resize, ...           float fallback (``exact=False``, with a note)
==========================================  ==================================================

Layers keep every tensor in the graph's layout (NCHW), so per-layer comparisons with the float
model line up; each lib_nn layer views its input channels-last, as lib_nn reads it. Options:
:class:`~quantemu.backends.xs3.lower_context.Options`.
"""

from __future__ import annotations

from collections.abc import Callable

from quantemu.backends.xs3.lower_context import LoweringContext, Options
from quantemu.backends.xs3.lower_conv import lower_conv, lower_dense
from quantemu.backends.xs3.lower_misc import LUT_OPS, MOVES, lower_float, lower_lookup, lower_move
from quantemu.backends.xs3.lower_pool import lower_avgpool, lower_global_avgpool, lower_maxpool
from quantemu.backends.xs3.lower_quant import override_activation
from quantemu.backends.xs3.lower_tflite import lower_add, lower_tflite_avgpool
from quantemu.errors import UnsupportedError
from quantemu.program import Layer, LoweredModel

__all__ = ["Options", "lower"]

LIB_NN = "lib_nn a5f0c8b (2021-01-14), BSO operators"
# Operators TFLite-Micro has int8 reference kernels for (and lib_nn does not): XMOS's runtime
# would run those; quantemu approximates them in float with exact=False.
FALLBACK_OPS = (
    "Concat",
    "ConvTranspose",
    "Div",
    "GlobalMaxPool",
    "HardSwish",
    "LeakyRelu",
    "MatMul",
    "Mul",
    "PRelu",
    "ReduceMean",
    "Resize",
    "Softmax",
    "Upsample",
)


def _conv(ctx: LoweringContext, node) -> Layer:
    if ctx.const(node.inputs[1]) is None:
        raise UnsupportedError(f"{node}: the weights must be a constant (initializer)")
    if tuple(node.attrs["dilations"]) != (1, 1):
        why = f"dilations {tuple(node.attrs['dilations'])}: lib_nn convolutions have no dilation"
        return lower_float(ctx, node, why)
    return lower_conv(ctx, node)


def _dense(ctx: LoweringContext, node) -> Layer:
    b = ctx.const(node.inputs[1])
    rank = len(ctx.shape(node.inputs[0]))
    if b is None or b.ndim != 2 or rank != 2:
        return lower_float(ctx, node, "not a fully-connected layer: weights must be constant 2-D")
    return lower_dense(ctx, node)


def _avgpool(ctx: LoweringContext, node) -> Layer:
    return lower_avgpool(ctx, node) or lower_tflite_avgpool(ctx, node)


def _global_avgpool(ctx: LoweringContext, node) -> Layer:
    if node.op_type == "ReduceMean" and tuple(node.attrs["axes"]) != (2, 3):
        return lower_float(ctx, node)
    layer = lower_global_avgpool(ctx, node)
    return layer or lower_float(ctx, node, "C % 4 != 0: no lib_nn avgpool2d_global")


RULES: dict[str, Callable[[LoweringContext, object], Layer]] = {
    "Conv": _conv,
    "Gemm": _dense,
    "MatMul": _dense,
    "Add": lower_add,
    "Sub": lower_add,
    "MaxPool": lower_maxpool,
    "AveragePool": _avgpool,
    "GlobalAveragePool": _global_avgpool,
    "ReduceMean": _global_avgpool,
    **dict.fromkeys(MOVES, lower_move),
    **dict.fromkeys(LUT_OPS, lower_lookup),
}


def lower_node(ctx: LoweringContext, node) -> Layer:
    """The XS3 layer for one graph node (see the module docstring's table)."""
    if len(node.outputs) != 1:
        raise UnsupportedError(f"{node}: operators with {len(node.outputs)} outputs")
    rule = RULES.get(node.op_type)
    if rule is not None:
        return rule(ctx, node)
    if node.op_type in FALLBACK_OPS:
        return lower_float(ctx, node)
    supported = sorted({*RULES, *FALLBACK_OPS})
    raise UnsupportedError(
        f"{node}: operator {node.op_type!r} has neither a lib_nn nor a TFLite-Micro int8 kernel "
        f"on XS3; supported operators: {', '.join(supported)}"
    )


def header(options: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (DESIGN principle 9)."""
    return {
        "target": "XMOS xcore.ai (XS3 VPU) through lib_nn",
        "library": LIB_NN,
        "model": options.model.value,
        "symmetric_saturation": str(options.symmetric_saturation),
        "activation_clamp": str(options.activation_clamp),
        "quantization": (
            "TFLite int8 post-training: per-tensor asymmetric activations, per-channel "
            "symmetric weights, int32 bias; BSO by tflite2xcore's rules"
        ),
        "rounding": (
            "lib_nn: RSHR ties toward +inf (VLSAT); TFLite-Micro kernels: gemmlowp, ties away "
            "from zero; input QUANTIZE: ties away from zero"
        ),
    }


def input_encoding(ctx: LoweringContext, name: str):
    """How graph input ``name`` is quantized on entry.

    A QDQ model quantizes an input with the Q/DQ pair right after it (imported as a saturation
    Clip whose output carries the pair's override): when every reader of the input is such a
    Clip with the same parameters, the input takes them, so the data enters on the model's
    grid. Otherwise TFLite's parameters from the calibrated range.
    """
    readers = ctx.graph.consumers(name)
    overrides = [ctx.graph.quant_overrides.get(n.outputs[0]) for n in readers]
    clips = readers and all(n.op_type == "Clip" for n in readers) and None not in overrides
    if clips and all(o.same_parameters(overrides[0]) for o in overrides):
        ctx.encodings[name] = override_activation(overrides[0], name)
    return ctx.encoding(name)


def lower(graph, ranges, options: Options | None = None, **kwargs) -> LoweredModel:
    """Lower an optimized ``graph`` with calibrated ``ranges`` onto XS3 (module docstring).

    ``options``: an :class:`Options`, or keyword options for :meth:`Options.from_mapping`.
    """
    opts = options if isinstance(options, Options) else Options.from_mapping(kwargs)
    ctx = LoweringContext(graph, ranges, opts)
    input_encodings = {info.name: input_encoding(ctx, info.name) for info in graph.inputs}
    layers = tuple(lower_node(ctx, node) for node in graph.nodes)
    return LoweredModel("xs3", input_encodings, layers, header(opts))
