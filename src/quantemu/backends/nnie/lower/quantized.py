"""Layers with NNIE clips (``nnie:<Op>``): log-coded inputs, weights and output.

:class:`NnieLayer` runs one graph node on log-coded tensors. Its activation inputs are read at
their clips (re-quantized on entry when the stored clip differs, e.g. a Relu output whose own
clip is smaller, or inputs that share one clip), weights are log codes fixed at lowering time,
the node's float kernel (:func:`quantemu.graph.executor.run_node`) computes on the exact
dequantized levels in float32, and the output is log-quantized with the output tensor's clip.

NNIE's internal accumulation and requantization are not publicly specified, so layers that do
arithmetic (:data:`COMPUTE_OPS`) are ``exact=False``; layers that only select or move levels
(:data:`SELECT_OPS`) are exact whatever NNIE does inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.encoding import LogEncoding, quantize_counted
from quantemu.backends.nnie.lower.fallback import excluded
from quantemu.backends.nnie.lower.options import GroupedConv, LayerInputs
from quantemu.errors import UnsupportedError
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program.encoding import QTensor
from quantemu.program.layer import Layer, LayerOutput
from quantemu.program.lowering import NotLowerable

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
# The node input that holds the weights, log-quantized when it is a constant.
WEIGHT_INPUT = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1, "MatMul": 1}

COMPUTE_NOTE = (
    "{what} log-quantized exactly (nnie.md); NNIE's internal accumulation and "
    "requantization are not publicly specified: computed in float32 on the dequantized levels, "
    "output log-quantized"
)
SELECT_NOTE = "selects/moves exact levels; output log-quantized (no arithmetic involved)"

# A node input: an index into the layer's tensor inputs, a constant float32 array (dequantized
# weights or float parameters), or None for an omitted optional input.
Slot = int | np.ndarray | None


@dataclass(frozen=True, eq=False)
class WeightCodes:
    """A log-quantized constant input: node input ``position``, its codes and encoding, and how
    many weights saturated at the top level (the snapped clip can be just below ``max|w|``)."""

    position: int
    name: str
    codes: np.ndarray
    encoding: LogEncoding
    clipped: int


@dataclass(frozen=True, eq=False, kw_only=True)
class NnieLayer(Layer):
    """A graph node on log-coded tensors (see the module docstring).

    ``input_encodings[i]`` is the clip input ``i`` is read at; ``encoding`` the output's.
    ``slots`` gives, per node input, where its value comes from. Counters: ``clipped`` and
    ``underflow_to_zero`` (output quantization plus any input re-quantization),
    ``inputs_requantized`` (input elements that were re-quantized to this layer's input clip;
    present when ``requantizes``: lowering found an input stored at another clip). Internals:
    ``pre_quant``, the float32 output before log quantization.
    """

    node: Node
    input_encodings: tuple[LogEncoding, ...]
    slots: tuple[Slot, ...]
    encoding: LogEncoding
    weights: tuple[WeightCodes, ...] = field(default=())
    requantizes: bool = False

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        counters = {"clipped": 0, "underflow_to_zero": 0}
        if self.requantizes:
            counters["inputs_requantized"] = 0
        values = [
            _read(tensor, encoding, counters)
            for tensor, encoding in zip(inputs, self.input_encodings, strict=True)
        ]
        args = [values[s] if isinstance(s, int) else s for s in self.slots]
        y = run_node(self.node, args)[0]
        codes, clipped, underflow = quantize_counted(y, self.encoding)
        counters["clipped"] += clipped
        counters["underflow_to_zero"] += underflow
        return LayerOutput(QTensor(codes, self.encoding), counters, {"pre_quant": y})


def _read(tensor: QTensor, encoding: LogEncoding, counters: dict) -> np.ndarray:
    """The float32 levels a layer computes on: the stored ones, or re-quantized to ``encoding``."""
    if tensor.encoding == encoding:
        return tensor.dequantize()
    codes, clipped, underflow = quantize_counted(tensor.dequantize(), encoding)
    counters["clipped"] += clipped
    counters["underflow_to_zero"] += underflow
    counters["inputs_requantized"] = counters.get("inputs_requantized", 0) + int(codes.size)
    return encoding.dequantize(codes)


def compute_rule(ctx: NnieContext, node: Node) -> NnieLayer:
    """A :data:`COMPUTE_OPS` node: ``exact=False`` (NNIE's arithmetic is not public)."""
    return _log_layer(ctx, node, select=False)


def select_rule(ctx: NnieContext, node: Node) -> NnieLayer:
    """A :data:`SELECT_OPS` node: exact (it only selects or moves levels)."""
    return _log_layer(ctx, node, select=True)


def conv_rule(ctx: NnieContext, node: Node) -> NnieLayer:
    """Conv/ConvTranspose; a grouped one falls back unless ``grouped_conv="log"``."""
    group = node.attrs["group"]
    if group != 1 and ctx.options.grouped_conv is GroupedConv.FLOAT:
        raise NotLowerable(excluded(f"grouped {node.op_type} (group={group})"))
    return compute_rule(ctx, node)


def _log_layer(ctx: NnieContext, node: Node, *, select: bool) -> NnieLayer:
    inputs, slots, weights = _slots(ctx, node)
    if not inputs:
        raise UnsupportedError(
            f"nnie: {node} reads only constants; fold it (quantemu.graph.optimize) first"
        )
    encodings = tuple(ctx.activation(name) for name in inputs)
    what = "inputs and weights" if weights else "inputs"
    notes = [SELECT_NOTE if select else COMPUTE_NOTE.format(what=what)]
    if ctx.options.layer_inputs is LayerInputs.SHARED and len(set(encodings)) > 1:
        shared = max(encodings, key=lambda e: e.clip)
        encodings = (shared,) * len(inputs)
        notes.append(f"inputs share one clip {shared.clip:.6g} (layer_inputs='shared')")
    requantized = [
        (name, enc) for name, enc in zip(inputs, encodings, strict=True) if ctx.stored(name) != enc
    ]
    notes += [
        f"reads {name!r} (stored at clip {ctx.stored(name).clip:.6g}) re-quantized to clip "
        f"{enc.clip:.6g}"
        for name, enc in requantized
    ]
    notes += [
        f"weights {w.name!r} clip {w.encoding.clip:.6g} (k={w.encoding.k}), {w.clipped} saturated"
        for w in weights
    ]
    if sum(isinstance(s, np.ndarray) for s in slots) > len(weights):
        notes.append("bias/parameters in float32 (not quantized in MQBench's NNIE flow)")
    return ctx.layer(
        NnieLayer,
        node,
        op=f"nnie:{node.op_type}",
        inputs=inputs,
        exact=select,
        note="; ".join(notes),
        node=node,
        input_encodings=encodings,
        slots=slots,
        encoding=ctx.activation(node.outputs[0]),
        weights=weights,
        requantizes=bool(requantized),
    )


def _slots(ctx: NnieContext, node: Node):
    """Per node input: a tensor index, a constant (log-dequantized weights or float32), or None.

    Returns ``(tensor inputs, slots, log-quantized weights)``.
    """
    inputs: list[str] = []
    slots: list[Slot] = []
    weights: list[WeightCodes] = []
    for position, name in enumerate(node.inputs):
        if not name:
            slots.append(None)
        elif name not in ctx.graph.initializers:
            slots.append(len(inputs))
            inputs.append(name)
        elif WEIGHT_INPUT.get(node.op_type) == position:
            weight = _log_weight(ctx, name, position)
            weights.append(weight)
            slots.append(weight.encoding.dequantize(weight.codes))
        else:
            slots.append(ctx.float_constant(name))
    return tuple(inputs), tuple(slots), tuple(weights)


def _log_weight(ctx: NnieContext, name: str, position: int) -> WeightCodes:
    """Weights clipped to ``[-c, c]`` and log-quantized with ``c = max|w|`` snapped (MQBench)."""
    values = np.asarray(ctx.graph.initializers[name], dtype=np.float32)
    encoding = ctx.weight(name, values)
    codes, clipped, _ = quantize_counted(values, encoding)
    codes.setflags(write=False)
    return WeightCodes(position, name, codes, encoding, clipped)
