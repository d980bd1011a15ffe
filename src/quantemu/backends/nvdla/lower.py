"""Lower a float graph onto NVDLA: ``lower(graph, ranges, **options) -> LoweredModel``.

Quantization follows NVIDIA's compiler (nvdla/sw, ``notes/toolchains.md``): symmetric per-tensor
int8 activations (``max|x| / 127``, offset 0), int8 weights per kernel (or per filter), the int16
bias rule, per-tensor rescale in the SDP output converter or per-channel in the BS MUL operand.
Every layer computes with the nvdla ops (CACC, SDP, PDP, CDP); the few ops NVDLA cannot run
(Softmax) fall back to float on the CPU, as nvdla/sw does, with ``exact=False``.

=====================================  ================================================
graph op                               NVDLA
=====================================  ================================================
Conv, Gemm, MatMul (constant weights)  CMAC + CACC + SDP (bias BS ALU, rescale, ReLU)
Add, Sub, Mul                          SDP Y (EW ALU SUM / MUL PROD with converters)
Relu, Clip, LeakyRelu, PRelu           SDP X units (standalone activations)
BatchNormalization (not folded)        SDP BS MUL + BN ALU
Sigmoid, Tanh                          SDP Y LUT (programmed by quantemu)
MaxPool, AveragePool, Global*Pool      PDP (global pools in stages of kernels <= 8)
LRN                                    CDP
Concat                                 memory placement (+ SDP requantization)
Flatten, Reshape, Transpose            memory layout
Softmax                                float32 on the CPU (exact=False)
=====================================  ================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from quantemu._version import __version__
from quantemu.backends.nvdla.lower_act import (
    lower_activation,
    lower_batchnorm,
    lower_lut,
    lower_prelu,
)
from quantemu.backends.nvdla.lower_conv import lower_conv
from quantemu.backends.nvdla.lower_ew import lower_ew
from quantemu.backends.nvdla.lower_misc import (
    CPU_OPS,
    LAYOUT_OPS,
    lower_concat,
    lower_cpu,
    lower_layout,
)
from quantemu.backends.nvdla.lower_pool import lower_global_pool, lower_lrn, lower_pool
from quantemu.backends.nvdla.lower_scales import (
    Context,
    Options,
    Rescale,
    WeightScaling,
    node_error,
)
from quantemu.backends.nvdla.quantize import ScaleSplit
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node
from quantemu.program import Layer, LoweredModel

__all__ = ["BUILDERS", "Options", "Rescale", "ScaleSplit", "WeightScaling", "lower"]

Builder = Callable[[Node, Context], Layer]

BUILDERS: dict[str, Builder] = {
    "Conv": lower_conv,
    "Gemm": lower_conv,
    "MatMul": lower_conv,
    "Add": lower_ew,
    "Sub": lower_ew,
    "Mul": lower_ew,
    "Relu": lower_activation,
    "Clip": lower_activation,
    "LeakyRelu": lower_activation,
    "PRelu": lower_prelu,
    "BatchNormalization": lower_batchnorm,
    "Sigmoid": lower_lut,
    "Tanh": lower_lut,
    "MaxPool": lower_pool,
    "AveragePool": lower_pool,
    "GlobalAveragePool": lower_global_pool,
    "GlobalMaxPool": lower_global_pool,
    "LRN": lower_lrn,
    "Concat": lower_concat,
    **dict.fromkeys(LAYOUT_OPS, lower_layout),
    **dict.fromkeys(CPU_OPS, lower_cpu),
}


def unsupported(node: Node, what: str = "") -> UnsupportedError:
    """The error for a node NVDLA cannot run (and nvdla/sw would not put on the CPU)."""
    detail = f" ({what})" if what else ""
    return UnsupportedError(
        f"nvdla lowering: {node} uses {node.op_type}{detail}, which NVDLA cannot run and "
        f"nvdla/sw does not fall back for; supported ops: {', '.join(sorted(BUILDERS))}"
    )


def header(options: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (DESIGN principle 9)."""
    return {
        "backend": "nvdla",
        "model": "NVDLA v1 nv_full, INT8 (cmod nvdla/hw 1a65f1f semantics)",
        "quantization": "nvdla/sw compiler INT8: activations symmetric per tensor "
        "(scale = max|x|/127, offset 0); weights int8 floor(w/s + 0.5) float32, "
        f"{options.weights.value}; int16 bias + BS_ALU_SHIFT_VALUE",
        "rounding": "half away from zero in every converter/truncate (NVDLA); weights and "
        "biases half up (compiler); graph inputs and CPU fallbacks half to even (host)",
        **{f"option.{k}": v for k, v in options.describe().items()},
        "element_wise": "SDP Y with EW converters (nvdla/sw uses X1 raw codes: equal scales only)",
        "luts": "integer LUTs filled by quantemu (nvdla/sw fills FP16 LUTs only)",
        "semantics": "conformance/nvdla.md (NVDLA cmod), notes/toolchains.md (nvdla/sw)",
        "quantemu": __version__,
    }


def lower(
    graph: Graph, ranges: Mapping, options: Options | None = None, **kwargs: Any
) -> LoweredModel:
    """Lower the optimized ``graph`` with calibrated ``ranges`` (tensor -> (min, max)).

    Options: ``weights`` (``per_kernel`` | ``per_filter``), ``rescale`` (``auto`` |
    ``output_converter`` | ``bs_mul``), ``scale_split`` (``nvdla_compiler`` | ``exact``); see
    :class:`Options`. Unknown options or values raise :class:`InvalidInputError`; ops NVDLA
    cannot run raise :class:`UnsupportedError` naming the node.
    """
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"nvdla lowering: expected a Graph, got {type(graph).__name__}")
    opts = options if isinstance(options, Options) else Options.from_mapping(kwargs)
    ctx = Context(graph, ranges, opts)
    for info in graph.inputs:
        ctx.encodings[info.name] = ctx.new_encoding(info.name)
    inputs = dict(ctx.encodings)
    layers = []
    for node in graph.nodes:
        build = BUILDERS.get(node.op_type)
        if build is None:
            raise unsupported(node)
        try:
            layer = build(node, ctx)
        except InvalidInputError as exc:
            if str(exc).startswith("nvdla lowering"):
                raise
            raise node_error(node, exc) from exc
        ctx.encodings[layer.output] = layer.encoding
        layers.append(layer)
    return LoweredModel("nvdla", inputs, tuple(layers), header(ctx.options))
