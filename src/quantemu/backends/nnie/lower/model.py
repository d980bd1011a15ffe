"""Lower a float graph onto NNIE: MQBench's NNIE deploy flow, simulated layer by layer.

``lower(graph, ranges, options) -> NnieLoweredModel`` (``quantemu.compile(graph,
backend="nnie", ...)`` calls it on the optimized, calibrated graph). The scheme
(``notes/toolchains.md``, seed 003, MQBench ``deploy_nnie.py``):

- every activation tensor is stored as 8-bit logarithmic codes (:class:`LogEncoding`) with one
  clip, ``max(|min|, |max|)`` of its calibrated range snapped to the gfpq table
  (:mod:`.context`); the graph input is quantized with its clip on entry;
- weights (input 1 of Conv, ConvTranspose, Gemm, MatMul when constant) are log-quantized with
  ``max|w|`` snapped; biases and other constant parameters stay float32 (MQBench's NNIE flow
  quantizes neither);
- which op becomes which layer is :data:`.rules.RULES`: layers with NNIE clips
  (:mod:`.quantized`), layers on the codes (:mod:`.codes`), float fallbacks for the layer types
  MQBench's flow leaves without parameters (:mod:`.fallback`); other operators raise
  :class:`~quantemu.errors.UnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quantemu._version import __version__
from quantemu.backends.nnie.cliptable import DEFAULT_K_MAX, DEFAULT_K_MIN
from quantemu.backends.nnie.lint import Finding, Severity, lint_graph, summarize
from quantemu.backends.nnie.lower.ceil_pooling import METADATA_KEY
from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.options import Options
from quantemu.backends.nnie.lower.rules import RULES
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph
from quantemu.program.model import LoweredModel


@dataclass(frozen=True)
class NnieLoweredModel(LoweredModel):
    """A :class:`LoweredModel` with the NNIE constraints lint's findings and the options."""

    findings: tuple[Finding, ...] = ()
    options: Options = field(default_factory=Options)


def lower(
    graph: Graph, ranges: Mapping[str, Any], options: Options | None = None
) -> NnieLoweredModel:
    """Lower ``graph`` (optimized) with calibrated ``ranges`` (tensor name -> TensorRange) and
    typed ``options`` (:class:`Options`, the defaults for None; ``Options.from_mapping`` types
    names and text).
    """
    opts = Options.checked(options)
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"nnie: lower() takes a quantemu Graph, got {type(graph).__name__}")
    if not isinstance(ranges, Mapping):
        raise InvalidInputError(
            f"nnie: ranges must map tensor names to calibrated ranges (quantemu.calibrate), got "
            f"{type(ranges).__name__}"
        )
    _refuse_lint_errors(graph)
    ctx = NnieContext(graph, ranges, opts)
    inputs = {info.name: ctx.activation(info.name) for info in graph.inputs}
    ctx.encodings.update(inputs)  # how each tensor is stored, known statically
    layers = RULES.lower_graph(ctx)
    findings = tuple(lint_graph(graph))
    return NnieLoweredModel(
        backend="nnie",
        input_encodings=inputs,
        layers=layers,
        header=_header(opts, findings, graph.metadata.get(METADATA_KEY, "")),
        findings=findings,
        options=opts,
    )


def _refuse_lint_errors(graph: Graph) -> None:
    """A model NNIE's toolchain would reject is refused with the lint's findings, never
    simulated as if it ran (pool rounding, which NNIE does compute, is rewritten before)."""
    errors = [f for f in lint_graph(graph) if f.severity is Severity.ERROR]
    if errors:
        lines = "\n".join(f"  - {f.node} ({f.rule}): {f.message}; {f.advice}" for f in errors)
        hint = ""
        if any(f.rule == "pool_ceil_mode" for f in errors):
            hint = (
                "\n(quantemu.compile, and lower() on quantemu.prepare(graph, 'nnie'), simulate "
                "NNIE's ceil pooling instead)"
            )
        raise UnsupportedError(
            f"nnie: NNIE's toolchain rejects or computes differently {len(errors)} node(s) of "
            f"this model (quantemu inspect MODEL --lint nnie):\n{lines}{hint}"
        )


def header(opts: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers (the lint summary is added by
    :func:`lower`, which has the graph)."""
    return {
        "backend": "nnie",
        "variant": "8-bit log, 16 levels/octave",
        "rounding": "round(16*log2|x|) - z, clamped to 0..127 (never a tie for float32); "
        "P/N zero thresholds as nnie.md section 3",
        "semantics": "shared/conformance/nnie.md; MQBench NNIEQuantizeFunc (ModelTC/MQBench "
        "00f477d); MQBench deploy_nnie.py flow",
        "clip_table": f"quantemu-generated 2^(k/16), k in [{DEFAULT_K_MIN}, {DEFAULT_K_MAX}] "
        "(HiSilicon's gfpq_param_table_8bit.txt is not public)",
        "accumulation": "not publicly specified: float32 on dequantized levels (exact=False)",
        **opts.describe(),
        "quantemu": __version__,
    }


def _header(opts: Options, findings: tuple[Finding, ...], ceil_pools: str) -> dict[str, str]:
    full = header(opts)
    version = full.pop("quantemu")  # keeps the header's key order: lint before version
    pooling = {}
    if ceil_pools:
        pooling["pooling"] = (
            "NNIE's ceil rounding where the model says floor, so the shapes from there on are "
            f"NNIE's, not the model's (float reference included): {ceil_pools}"
        )
    return {**full, **pooling, "lint": summarize(list(findings)), "quantemu": version}
