"""A lowered model: integer layers in graph order, and running them on a batch.

A backend's ``lower.py`` turns the (optimized) float graph into a :class:`LoweredModel`: how each
graph input is quantized, and one :class:`Layer` per graph node that produces a tensor. A layer
reads the :class:`~quantemu.simulate.encoding.QTensor` of its input tensors and returns the
QTensor of its output, computed with the backend's exact operators, plus the counters the target
keeps (accumulator saturation, output saturation, pair saturation, LUT under/overflow...).

A layer that does not run the target's bit-exact arithmetic (a float fallback the vendor's
toolchain would also make, or an integer kernel quantemu approximates) says so with
``exact=False`` and a ``note``; reports show it.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.simulate.encoding import Encoding, QTensor


@dataclass(frozen=True)
class LayerOutput:
    """What one layer call produced: its output tensor and its counters (name -> count)."""

    tensor: QTensor
    counters: Mapping[str, int] = field(default_factory=dict)
    # Integer intermediates worth inspecting (e.g. "acc": the int32 accumulators), optional.
    internals: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Layer(abc.ABC):
    """One lowered graph node. Subclasses are frozen, keyword-only dataclasses that add their
    precomputed parameters to these fields and implement :meth:`run`."""

    name: str  # the graph node's name
    op: str  # what runs on the target, e.g. "conv2d_deep", "sdp", "float:Softmax"
    inputs: tuple[str, ...]  # names of the graph tensors it reads (graph inputs or outputs)
    output: str  # the graph tensor it produces
    # Required, without defaults: every layer states whether it is the target's bit-exact
    # arithmetic (a default would also leak into subclasses that redeclare the field).
    exact: bool
    note: str  # why not exact / what fell back / anything a report should say ("" if nothing)

    @abc.abstractmethod
    def run(self, inputs: list[QTensor]) -> LayerOutput:
        """Compute the layer on a batch (inputs in ``self.inputs`` order, batch first)."""


@dataclass(frozen=True)
class LoweredModel:
    """The result of a backend's ``lower()``.

    ``input_encodings``: graph input name -> how the float input is quantized on entry.
    ``layers``: in an order where every layer's inputs are produced earlier.
    ``header``: every result-changing choice (backend, model variant, ISA, rounding rule,
    library versions) for report headers (DESIGN principle 9).
    """

    backend: str
    input_encodings: Mapping[str, Encoding]
    layers: tuple[Layer, ...]
    header: Mapping[str, str]


@dataclass(frozen=True)
class RunResult:
    """One batch through a program: the quantized tensors and the counters of every layer."""

    tensors: Mapping[str, QTensor]
    counters: Mapping[str, Mapping[str, int]]  # layer name -> counters
    outputs: Mapping[str, np.ndarray]  # graph output name -> dequantized float32
    internals: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)  # by layer


def run_lowered(model: LoweredModel, outputs: tuple[str, ...], feeds: Mapping[str, np.ndarray]):
    """Quantize ``feeds`` and run every layer in order; keep every tensor (they are small)."""
    tensors: dict[str, QTensor] = {}
    for name, encoding in model.input_encodings.items():
        if name not in feeds:
            raise InvalidInputError(
                f"input {name!r} is missing; the model takes {', '.join(model.input_encodings)}"
            )
        x = np.asarray(feeds[name])
        if x.dtype.kind != "f":
            raise InvalidInputError(
                f"input {name!r} has dtype {x.dtype}; pass float data as the float model takes it "
                "(quantization to the target's codes happens inside the simulation)"
            )
        tensors[name] = QTensor(encoding.target_quantize(x.astype(np.float32)), encoding)
    counters: dict[str, Mapping[str, int]] = {}
    internals: dict[str, Mapping[str, np.ndarray]] = {}
    for layer in model.layers:
        out = layer.run([tensors[t] for t in layer.inputs])
        tensors[layer.output] = out.tensor
        counters[layer.name] = dict(out.counters)
        internals[layer.name] = dict(out.internals)
    missing = [o for o in outputs if o not in tensors]
    if missing:
        raise InvalidInputError(f"the lowered model does not produce the outputs {missing}")
    return RunResult(
        tensors=tensors,
        counters=counters,
        outputs={o: tensors[o].dequantize() for o in outputs},
        internals=internals,
    )
