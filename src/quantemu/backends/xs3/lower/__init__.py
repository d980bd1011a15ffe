"""Lower an optimized float graph onto XS3: TFLite int8 quantization, tflite2xcore's choices.

``lower(graph, ranges, options) -> LoweredModel`` (called by ``quantemu.compile(...,
backend="xs3")``) quantizes the model the way XMOS's flow does (TFLite post-training int8, then
tflite2xcore's BSO derivation and operator choice) and returns one layer per graph node:

==========================================  ==================================================
graph op                                    XS3 layer (module)
==========================================  ==================================================
Conv (group 1), 1x1 unit stride, no pads    ``conv2d_1x1`` (:mod:`.conv`)
Conv, ``K_w * C_in <= 32``, C_in 4/8/16/32  ``conv2d_shallowin``
Conv, depthwise (group = C_in = C_out)      ``conv2d_depthwise``
Conv, other                                 ``conv2d_deep``
Gemm, MatMul with constant 2-D weights      ``fully_connected_8``
MaxPool                                     ``maxpool2d`` / TFLite's reference, exact
                                            (:mod:`.pool`)
AveragePool                                 lib_nn ``avgpool2d`` (VALID, C % 4 == 0), else
                                            TFLite-Micro's reference (:mod:`.tflite`,
                                            ``exact=False``)
GlobalAveragePool, ReduceMean over H, W     lib_nn ``avgpool2d_global`` (C % 4 == 0)
Add, Sub                                    TFLite-Micro's reference ADD/SUB (:mod:`.tflite`,
                                            ``exact=False``)
Relu, Clip, Sigmoid, Tanh (standalone)      ``lookup8`` with tflite2xcore's table
                                            (:mod:`.activation`)
Flatten, Reshape, Transpose, Identity       the same codes, exact (:mod:`.layout`)
Softmax, Mul, Concat, Resize, ...           float fallback (:mod:`.fallback`, ``exact=False``,
                                            with a note)
==========================================  ==================================================

The op -> rule table is :data:`.rules.RULES`; the encodings of tensors come from
:class:`.context.Xs3Context` and the TFLite scheme in :mod:`.quantization`. Layers keep every
tensor in the graph's layout (NCHW), so per-layer comparisons with the float model line up; each
lib_nn layer views its input channels-last, as lib_nn reads it. Options: :class:`Options`.
"""

from __future__ import annotations

from quantemu.backends.tflite.lower.decompose import decompose_for_tf_converter
from quantemu.backends.tflite.quantize import (
    activation_params,
    bias_scales,
    int8_encoding,
    quantize_bias,
    quantize_weights,
)
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.backends.xs3.lower.fallback import FALLBACK_OPS
from quantemu.backends.xs3.lower.options import Options, Toolchain
from quantemu.backends.xs3.lower.rules import RULES
from quantemu.backends.xs3.lower.xformer import RULES as XFORMER_RULES
from quantemu.graph.ir import Graph
from quantemu.program import LoweredModel

__all__ = [
    "FALLBACK_OPS",
    "LIB_NN",
    "RULES",
    "Options",
    "Xs3Context",
    "activation_params",
    "bias_scales",
    "header",
    "int8_encoding",
    "lower",
    "prepare",
    "quantize_bias",
    "quantize_weights",
]

LIB_NN = "lib_nn a5f0c8b (2021-01-14), BSO operators"


def header(options: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (DESIGN principle 9)."""
    if options.toolchain is Toolchain.XFORMER:
        return {
            "target": "XMOS xcore.ai (XS3 VPU)",
            "toolchain": "xformer (xcore-opt, xmos-ai-tools 1.4.2), default options",
            "library": "lib_nn 0.5.0 output transform; TFLite-Micro reference kernels",
            "model": options.model.value,
            "vlashr": options.vlashr.value,
            "conv_err_threshold": str(options.conv_err_threshold),
            "quantization": "the model's own int8, else TensorFlow's converter",
        }
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


def prepare(graph: Graph, options: Options) -> Graph:
    """The float graph as TensorFlow's converter writes it before xcore-opt sees it
    (LayerNormalization and HardSigmoid out of int8 builtins); tflite2xcore's generation runs
    those as float fallbacks and keeps the graph."""
    if options.toolchain is Toolchain.XFORMER:
        return decompose_for_tf_converter(graph)
    return graph


def lower(graph: Graph, ranges, options: Options | None = None, **kwargs) -> LoweredModel:
    """Lower an optimized ``graph`` with calibrated ``ranges`` onto XS3 (module docstring).

    ``options``: an :class:`Options`, or keyword options for :meth:`Options.from_mapping`.
    """
    opts = options if isinstance(options, Options) else Options.from_mapping(kwargs)
    if opts.toolchain is Toolchain.XFORMER:
        xctx = Xs3Context(graph, ranges, opts)
        encodings = {info.name: xctx.input_encoding(info.name) for info in graph.inputs}
        return LoweredModel("xs3", encodings, XFORMER_RULES.lower_graph(xctx), header(opts))
    ctx = Xs3Context(graph, ranges, opts)
    input_encodings = {info.name: ctx.input_encoding(info.name) for info in graph.inputs}
    return LoweredModel("xs3", input_encodings, RULES.lower_graph(ctx), header(opts))
