"""The layers a lowered NNIE model is made of (built by :mod:`.lower`).

- :class:`NnieLayer`: one graph node run on log-coded tensors. Its activation inputs are read at
  their clips (re-quantized on entry when the stored clip differs, e.g. a Relu output whose own
  clip is smaller, or inputs that share one clip), weights are log codes fixed at lowering time,
  the node's float kernel (:func:`quantemu.graph.executor.run_node`) computes on the exact
  dequantized levels in float32, and the output is log-quantized with the output tensor's clip.
  The same class runs MQBench's excluded layer types as float fallbacks (inputs used as stored,
  float weights) and the selection layers (MaxPool, Concat, ...), which need no arithmetic.
- :class:`CodeLayer`: Flatten, Reshape, Identity, Dropout and Relu applied to the codes
  themselves; the output keeps the input's encoding (exact for any NNIE implementation: a
  reshape moves codes, Relu turns negative codes into ``0x80``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from quantemu.backends.nnie.lower_encoding import LogEncoding, quantize_counted
from quantemu.backends.nnie.ops import CODE_ZERO, SIGN_BIT
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, QTensor

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

    ``input_encodings[i]`` is the clip input ``i`` is read at, or ``None`` to use it as stored
    (float fallbacks, which have no input clip in MQBench's flow). ``slots`` gives, per node
    input, where its value comes from. Counters: ``clipped`` and ``underflow_to_zero`` (output
    quantization plus any input re-quantization), ``inputs_requantized`` (input elements that
    were re-quantized to this layer's input clip; present when ``requantizes``: lowering found an
    input stored at another clip). Internals: ``pre_quant``, the float32 output before log
    quantization.
    """

    node: Node
    input_encodings: tuple[LogEncoding | None, ...]
    slots: tuple[Slot, ...]
    output_encoding: LogEncoding
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
        codes, clipped, underflow = quantize_counted(y, self.output_encoding)
        counters["clipped"] += clipped
        counters["underflow_to_zero"] += underflow
        return LayerOutput(QTensor(codes, self.output_encoding), counters, {"pre_quant": y})


def _read(tensor: QTensor, encoding: LogEncoding | None, counters: dict) -> np.ndarray:
    """The float32 levels a layer computes on: the stored ones, or re-quantized to ``encoding``."""
    if encoding is None or tensor.encoding == encoding:
        return tensor.dequantize()
    codes, clipped, underflow = quantize_counted(tensor.dequantize(), encoding)
    counters["clipped"] += clipped
    counters["underflow_to_zero"] += underflow
    counters["inputs_requantized"] = counters.get("inputs_requantized", 0) + int(codes.size)
    return encoding.dequantize(codes)


@dataclass(frozen=True, eq=False, kw_only=True)
class CodeLayer(Layer):
    """Flatten / Reshape / Identity / Dropout / Relu on the codes; the encoding is kept."""

    node: Node

    def compute(self, inputs: Sequence[QTensor]) -> LayerOutput:
        tensor = inputs[0]
        if self.node.op_type == "Relu":
            # Negative codes (sign bit set, 0x81..0xFF) become zero (0x80); 0x80 stays.
            codes = np.where(tensor.codes > SIGN_BIT, np.uint8(CODE_ZERO), tensor.codes)
            zeroed = int(np.count_nonzero(tensor.codes > SIGN_BIT))
            return LayerOutput(QTensor(codes, tensor.encoding), {"negatives_zeroed": zeroed})
        codes = run_node(self.node, [tensor.codes])[0]  # a pure data movement of the bytes
        return LayerOutput(QTensor(codes, tensor.encoding), {})
