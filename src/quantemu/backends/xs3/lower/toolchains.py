"""Lower an optimized float graph onto XS3 as the chosen XMOS toolchain generation builds it.

``lower(graph, ranges, options) -> LoweredModel`` (called by ``quantemu.compile(...,
backend="xs3")``) quantizes the model as TFLite int8 (the model's own quantization, else
TensorFlow's converter: :class:`~.context.Xs3Context`) and lowers every node with the rule table
of :attr:`Options.toolchain <.options.Options.toolchain>`:

- ``xformer`` (default): xcore-opt 1.4.2's XC ops, TFLite-Micro's kernels for the rest
  (:data:`quantemu.backends.xs3.xformer.lower.rules.RULES`);
- ``tflite2xcore``: the older converter's lib_nn BSO operators, TFLite-Micro's ADD and
  AVERAGE_POOL_2D, float fallbacks for the rest
  (:data:`quantemu.backends.xs3.bso.lower.rules.RULES`).

Layers keep every tensor in the graph's layout (NCHW), so per-layer comparisons with the float
model line up.
"""

from __future__ import annotations

from quantemu.backends.tflite.lower.decompose import decompose_for_tf_converter
from quantemu.backends.xs3.bso.lower.rules import RULES as BSO_RULES
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.backends.xs3.lower.options import Options, Toolchain
from quantemu.backends.xs3.xformer.lower.rules import RULES as XFORMER_RULES
from quantemu.graph.ir import Graph
from quantemu.program import LoweredModel

__all__ = ["LIB_NN", "RULES", "header", "lower", "prepare"]

LIB_NN = "lib_nn a5f0c8b (2021-01-14), BSO operators"
#: Each toolchain generation's rule table.
RULES = {Toolchain.XFORMER: XFORMER_RULES, Toolchain.TFLITE2XCORE: BSO_RULES}


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


def lower(graph: Graph, ranges, options: Options | None = None) -> LoweredModel:
    """Lower an optimized ``graph`` with calibrated ``ranges`` and typed ``options`` onto XS3
    (module docstring)."""
    opts = Options.checked(options)
    ctx = Xs3Context(graph, ranges, opts)
    encodings = {info.name: ctx.input_encoding(info.name) for info in graph.inputs}
    return LoweredModel("xs3", encodings, RULES[opts.toolchain].lower_graph(ctx), header(opts))
