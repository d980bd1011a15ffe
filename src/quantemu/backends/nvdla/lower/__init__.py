"""Lower a float graph onto NVDLA: ``lower(graph, ranges, options) -> LoweredModel``.

Quantization follows NVIDIA's compiler (nvdla/sw, ``notes/toolchains.md``): symmetric per-tensor
int8 activations (``max|x| / 127``, offset 0), int8 weights per kernel (or per filter), the int16
bias rule, per-tensor rescale in the SDP output converter or per-channel in the BS MUL operand.
Every layer computes with the nvdla ops (CACC, SDP, PDP, CDP); the few ops NVDLA cannot run
(Softmax) fall back to float on the CPU, as nvdla/sw does, with ``exact=False``.

``precision=fp16`` lowers onto the FP16 pipeline instead (:mod:`..fp16.lower`: no calibration, fp16
words). The package: :mod:`.options` (:class:`Options`), :mod:`.context` (every tensor's scale),
:mod:`.rules` (the op table, :data:`RULES`) and the layers with their rules by kind:
:mod:`.conv`, :mod:`.elementwise`, :mod:`.activation`, :mod:`.normalize`, :mod:`.pool`,
:mod:`.layout`, :mod:`.fallback`, on the SDP passes of :mod:`.sdp`.
"""

from __future__ import annotations

from collections.abc import Mapping

from quantemu._version import __version__
from quantemu.backends.nvdla.fp16.lower import header_fp16, lower_fp16
from quantemu.backends.nvdla.lower.context import NvdlaContext
from quantemu.backends.nvdla.lower.options import (
    Options,
    PipelinePrecision,
    Rescale,
    ScaleSplit,
    WeightScaling,
)
from quantemu.backends.nvdla.lower.pool import plane_factors
from quantemu.backends.nvdla.lower.rules import RULES
from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Graph
from quantemu.program import LoweredModel

__all__ = [
    "RULES",
    "NvdlaContext",
    "Options",
    "PipelinePrecision",
    "Rescale",
    "ScaleSplit",
    "WeightScaling",
    "calibration_free",
    "header",
    "lower",
    "plane_factors",
]


def calibration_free(options: Options) -> bool:
    """The FP16 pipeline uses no activation ranges (no calibration runs for it)."""
    return options.precision is PipelinePrecision.FP16


def header(options: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (DESIGN principle 9)."""
    if options.precision is PipelinePrecision.FP16:
        return header_fp16(options)
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


def lower(graph: Graph, ranges: Mapping, options: Options | None = None) -> LoweredModel:
    """Lower the optimized ``graph`` with calibrated ``ranges`` (tensor -> (min, max)) and typed
    ``options`` (:class:`Options`, ``Options.from_mapping`` for text or keywords): the INT8
    pipeline, or the FP16 one for ``precision=fp16``. Ops NVDLA cannot run raise
    :class:`~quantemu.errors.UnsupportedError` naming the node.
    """
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"nvdla lowering: expected a Graph, got {type(graph).__name__}")
    opts = Options.checked(options)
    if opts.precision is PipelinePrecision.FP16:
        return lower_fp16(graph, opts)
    ctx = NvdlaContext(graph, ranges, opts, supported_ops=tuple(RULES.supported()))
    for info in graph.inputs:
        ctx.encodings[info.name] = ctx.new_encoding(info.name)
    inputs = dict(ctx.encodings)
    return LoweredModel("nvdla", inputs, RULES.lower_graph(ctx), header(opts))
