"""Lower a float graph onto NNIE: MQBench's NNIE deploy flow, simulated layer by layer.

``lower(graph, ranges, **options) -> NnieLoweredModel`` (``quantemu.compile(graph,
backend="nnie", ...)`` calls it on the optimized, calibrated graph). The scheme
(``notes/toolchains.md``, seed 003, MQBench ``deploy_nnie.py``):

- every activation tensor is stored as 8-bit logarithmic codes (:class:`LogEncoding`) with one
  clip, ``max(|min|, |max|)`` of its calibrated range snapped to the gfpq table; the graph input
  is quantized with its clip on entry;
- weights (input 1 of Conv, ConvTranspose, Gemm, MatMul when constant) are log-quantized with
  ``max|w|`` snapped; biases and other constant parameters stay float32 (MQBench's NNIE flow
  quantizes neither);
- a layer with quantization parameters computes on the exact dequantized levels in float32 with
  quantemu.graph's float kernel, then log-quantizes its output. NNIE's internal accumulation and
  requantization are not publicly specified, so layers that do arithmetic (Conv, Gemm, Add,
  AveragePool, ...) are ``exact=False`` with a note; layers that only select or move levels
  (MaxPool, Concat, Transpose, Resize; Relu/Flatten/Reshape on codes) are ``exact=True``;
- layer types MQBench's flow leaves without parameters (PRelu, Sigmoid, Softmax, Clip,
  GlobalAveragePool, Mul; grouped Conv unless ``grouped_conv="log"``) run as float fallbacks
  (``exact=False``): float32 on the dequantized inputs with float weights, output log-quantized
  with its tensor's clip (where the next NNIE layer would quantize it);
- other operators raise :class:`~quantemu.errors.UnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu._version import __version__
from quantemu.backends.nnie.cliptable import DEFAULT_K_MAX, DEFAULT_K_MIN
from quantemu.backends.nnie.lint import Finding
from quantemu.backends.nnie.lower_clips import ClipSource
from quantemu.backends.nnie.lower_encoding import LogEncoding, quantize_counted
from quantemu.backends.nnie.lower_layers import CodeLayer, NnieLayer, Slot, WeightCodes
from quantemu.backends.nnie.lower_lint import lint_graph, summarize
from quantemu.backends.nnie.lower_options import (
    ClipSelection,
    GroupedConv,
    LayerInputs,
    Options,
    QuantOverrides,
)
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node
from quantemu.program import Layer, LoweredModel

__all__ = [
    "ClipSelection",
    "GroupedConv",
    "LayerInputs",
    "LogEncoding",
    "NnieLoweredModel",
    "Options",
    "QuantOverrides",
    "lint_graph",
    "lower",
]

# Applied to the codes, keeping the input's encoding (MQBench exports no clip for them).
CODE_OPS = ("Dropout", "Flatten", "Identity", "Relu", "Reshape")
# MQBench's nnie_exclude_layer_type that need arithmetic: float fallbacks.
FLOAT_OPS = ("Clip", "GlobalAveragePool", "Mul", "PRelu", "Sigmoid", "Softmax")
# Layers with NNIE clips whose result depends on (unspecified) internal arithmetic.
COMPUTE_OPS = (
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Conv",
    "ConvTranspose",
    "Gemm",
    "LRN",
    "LeakyRelu",
    "MatMul",
    "Sub",
    "Tanh",
)
# Layers with NNIE clips that only select or move levels: exact whatever NNIE does inside.
SELECT_OPS = ("Concat", "GlobalMaxPool", "MaxPool", "Resize", "Transpose")
SUPPORTED_OPS = tuple(sorted(CODE_OPS + FLOAT_OPS + COMPUTE_OPS + SELECT_OPS))
# The node input that holds the weights, log-quantized when it is a constant.
WEIGHT_INPUT = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1, "MatMul": 1}

COMPUTE_NOTE = (
    "{what} log-quantized exactly (nnie.md); NNIE's internal accumulation and "
    "requantization are not publicly specified: computed in float32 on the dequantized levels, "
    "output log-quantized"
)
SELECT_NOTE = "selects/moves exact levels; output log-quantized (no arithmetic involved)"
FLOAT_NOTE = (
    "float fallback: MQBench's NNIE flow exports no clip for {what}; float32 on the dequantized "
    "inputs{weights}, output log-quantized with its tensor's clip"
)


@dataclass(frozen=True)
class NnieLoweredModel(LoweredModel):
    """A :class:`LoweredModel` with the NNIE constraints lint's findings and the options."""

    findings: tuple[Finding, ...] = ()
    options: Options = field(default_factory=Options)


def lower(
    graph: Graph, ranges: Mapping[str, Any], options: Options | None = None, **kwargs: Any
) -> NnieLoweredModel:
    """Lower ``graph`` (optimized) with calibrated ``ranges`` (tensor name -> TensorRange).

    ``options``: see :class:`Options` (``clip_selection``, ``grouped_conv``, ``layer_inputs``,
    ``quant_overrides``); unknown names and bad values raise :class:`InvalidInputError`.
    """
    opts = options if isinstance(options, Options) else Options.from_mapping(kwargs)
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"nnie: lower() takes a quantemu Graph, got {type(graph).__name__}")
    if not isinstance(ranges, Mapping):
        raise InvalidInputError(
            f"nnie: ranges must map tensor names to calibrated ranges (quantemu.calibrate), got "
            f"{type(ranges).__name__}"
        )
    clips = ClipSource(ranges, graph.quant_overrides, opts.quant_overrides is QuantOverrides.RANGE)
    inputs = {info.name: clips.activation(info.name) for info in graph.inputs}
    stored: dict[str, LogEncoding] = dict(inputs)  # how each tensor is stored, known statically
    layers = []
    for node in graph.nodes:
        layer = _lower_node(graph, node, clips, opts, stored)
        out = layer.output_encoding if isinstance(layer, NnieLayer) else stored[layer.inputs[0]]
        stored[layer.output] = out
        layers.append(layer)
    findings = tuple(lint_graph(graph))
    return NnieLoweredModel(
        backend="nnie",
        input_encodings=inputs,
        layers=tuple(layers),
        header=_header(opts, findings),
        findings=findings,
        options=opts,
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
        **opts.header(),
        "quantemu": __version__,
    }


def _header(opts: Options, findings: tuple[Finding, ...]) -> dict[str, str]:
    full = header(opts)
    version = full.pop("quantemu")  # keeps the header's key order: lint before version
    return {**full, "lint": summarize(list(findings)), "quantemu": version}


def _lower_node(
    graph: Graph, node: Node, clips: ClipSource, opts: Options, stored: Mapping[str, LogEncoding]
) -> Layer:
    op = node.op_type
    if len(node.outputs) != 1:
        raise UnsupportedError(
            f"nnie: {node} has {len(node.outputs)} outputs; NNIE lowering handles "
            "single-output nodes"
        )
    if op in CODE_OPS:
        return _code_layer(graph, node)
    grouped = op in ("Conv", "ConvTranspose") and node.attrs["group"] != 1
    if op in FLOAT_OPS or (grouped and opts.grouped_conv is GroupedConv.FLOAT):
        what = f"grouped {op} (group={node.attrs['group']})" if grouped else f"{op} layers"
        return _float_layer(graph, node, clips, what)
    if op in COMPUTE_OPS or op in SELECT_OPS:
        return _log_layer(graph, node, clips, opts, stored)
    raise UnsupportedError(
        f"nnie: {node} (operator {op}) cannot be lowered to NNIE; supported operators: "
        f"{', '.join(SUPPORTED_OPS)}. Replace it in the model (e.g. Div by a constant -> Mul "
        "by its reciprocal) or run it outside NNIE"
    )


def _code_layer(graph: Graph, node: Node) -> CodeLayer:
    source = _activation_inputs(graph, node)
    if len(source) != 1 or len(node.inputs) != 1:
        raise UnsupportedError(
            f"nnie: {node} must read exactly one computed tensor to run on codes, got inputs "
            f"{list(node.inputs)}"
        )
    note = "negative codes -> 0x80 (exact)" if node.op_type == "Relu" else "moves codes (exact)"
    return CodeLayer(
        name=node.name,
        op=f"codes:{node.op_type}",
        inputs=source,
        output=node.outputs[0],
        exact=True,
        note=note,
        node=node,
    )


def _activation_inputs(graph: Graph, node: Node) -> tuple[str, ...]:
    return tuple(n for n in node.inputs if n and n not in graph.initializers)


def _float_layer(graph: Graph, node: Node, clips: ClipSource, what: str) -> NnieLayer:
    inputs, slots, weights = _slots(graph, node, clips, log_weights=False)
    has_consts = any(isinstance(s, np.ndarray) for s in slots)
    note = FLOAT_NOTE.format(what=what, weights=" with float32 parameters" if has_consts else "")
    return NnieLayer(
        name=node.name,
        op=f"float:{node.op_type}",
        inputs=inputs,
        output=node.outputs[0],
        exact=False,
        note=note,
        node=node,
        input_encodings=(None,) * len(inputs),
        slots=slots,
        output_encoding=clips.activation(node.outputs[0]),
        weights=weights,
    )


def _log_layer(
    graph: Graph, node: Node, clips: ClipSource, opts: Options, stored: Mapping[str, LogEncoding]
) -> NnieLayer:
    inputs, slots, weights = _slots(graph, node, clips, log_weights=True)
    if not inputs:
        raise UnsupportedError(
            f"nnie: {node} reads only constants; fold it (quantemu.graph.optimize) first"
        )
    encodings = tuple(clips.activation(name) for name in inputs)
    what = "inputs and weights" if weights else "inputs"
    notes = [SELECT_NOTE if node.op_type in SELECT_OPS else COMPUTE_NOTE.format(what=what)]
    if opts.layer_inputs is LayerInputs.SHARED and len(set(encodings)) > 1:
        shared = max(encodings, key=lambda e: e.clip)
        encodings = (shared,) * len(inputs)
        notes.append(f"inputs share one clip {shared.clip:.6g} (layer_inputs='shared')")
    requantized = [
        (name, enc) for name, enc in zip(inputs, encodings, strict=True) if stored[name] != enc
    ]
    notes += [
        f"reads {name!r} (stored at clip {stored[name].clip:.6g}) re-quantized to clip "
        f"{enc.clip:.6g}"
        for name, enc in requantized
    ]
    notes += [
        f"weights {w.name!r} clip {w.encoding.clip:.6g} (k={w.encoding.k}), {w.clipped} saturated"
        for w in weights
    ]
    if sum(isinstance(s, np.ndarray) for s in slots) > len(weights):
        notes.append("bias/parameters in float32 (not quantized in MQBench's NNIE flow)")
    return NnieLayer(
        name=node.name,
        op=f"nnie:{node.op_type}",
        inputs=inputs,
        output=node.outputs[0],
        exact=node.op_type in SELECT_OPS,
        note="; ".join(notes),
        node=node,
        input_encodings=encodings,
        slots=slots,
        output_encoding=clips.activation(node.outputs[0]),
        weights=weights,
        requantizes=bool(requantized),
    )


def _slots(graph: Graph, node: Node, clips: ClipSource, *, log_weights: bool):
    """Per node input: a tensor index, a constant (log-dequantized weights or float32), or None.

    Returns ``(tensor inputs, slots, log-quantized weights)``.
    """
    inputs: list[str] = []
    slots: list[Slot] = []
    weights: list[WeightCodes] = []
    for position, name in enumerate(node.inputs):
        if not name:
            slots.append(None)
        elif name not in graph.initializers:
            slots.append(len(inputs))
            inputs.append(name)
        elif log_weights and WEIGHT_INPUT.get(node.op_type) == position:
            weight = _log_weight(name, position, graph.initializers[name], clips)
            weights.append(weight)
            slots.append(weight.encoding.dequantize(weight.codes))
        else:
            clips.check_override(name)  # a QDQ constant: error unless quant_overrides="range"
            slots.append(np.asarray(graph.initializers[name], dtype=np.float32))
    return tuple(inputs), tuple(slots), tuple(weights)


def _log_weight(name: str, position: int, values: np.ndarray, clips: ClipSource) -> WeightCodes:
    """Weights clipped to ``[-c, c]`` and log-quantized with ``c = max|w|`` snapped (MQBench)."""
    values = np.asarray(values, dtype=np.float32)
    encoding = clips.weight(name, values)
    codes, clipped, _ = quantize_counted(values, encoding)
    codes.setflags(write=False)
    return WeightCodes(position, name, codes, encoding, clipped)
