"""A lowered model: integer layers in graph order, and running them on a batch.

A backend's lowering turns the (optimized) float graph into a :class:`LoweredModel`: how each
graph input is quantized, and one :class:`~quantemu.program.layer.Layer` per graph node that
produces a tensor. :func:`run_lowered` quantizes the feeds and runs the layers in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.program.encoding import Encoding, LinearEncoding, QTensor
from quantemu.program.layer import Layer


@dataclass(frozen=True)
class LoweredModel:
    """The result of a backend's lowering.

    ``input_encodings``: graph input name -> how the float input is quantized on entry.
    ``layers``: in an order where every layer's inputs are produced earlier.
    ``header``: every result-changing choice (backend, model variant, ISA, rounding rule,
    library versions) for report headers (DESIGN principle 9).
    """

    backend: str
    input_encodings: Mapping[str, Encoding]
    layers: tuple[Layer, ...]
    header: Mapping[str, str]


class KeptTensors(dict):
    """Tensor name -> :class:`QTensor`; asking for one that was not kept says how to keep it."""

    def __missing__(self, name: str) -> QTensor:
        raise InvalidInputError(
            f"tensor {name!r} was not kept: run(x) keeps the graph's outputs only (bounded "
            f"memory); run(x, keep='all') keeps every layer's tensors (kept: "
            f"{', '.join(list(self)[:6])}{' ...' if len(self) > 6 else ''})"
        )


class KeptInternals(dict):
    """Layer name -> its internals (accumulators, pre-quantization values); asking for a layer
    whose internals were not kept says how to keep them."""

    def __missing__(self, name: str) -> Mapping[str, np.ndarray]:
        raise InvalidInputError(
            f"the internals of layer {name!r} were not kept: run(x, keep='internals') keeps "
            "every layer's internals (accumulators, pre-quantization values) with its tensors"
        )


@dataclass(frozen=True)
class RunResult:
    """One batch through a program: the quantized tensors and the counters of every layer
    (``tensors`` holds every layer's, or only the graph inputs' and outputs', as kept)."""

    tensors: Mapping[str, QTensor]
    counters: Mapping[str, Mapping[str, int]]  # layer name -> counters
    outputs: Mapping[str, np.ndarray]  # graph output name -> dequantized float32
    # layer name -> internals (accumulators, ...), where kept (run(x, keep="internals"))
    internals: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=KeptInternals)


def quantize_feeds(
    model: LoweredModel, feeds: Mapping[str, np.ndarray | QTensor]
) -> dict[str, QTensor]:
    """The graph inputs as the target's codes, or a clear error for a missing or bad feed.

    A feed is float data (quantized here as the target does) or a :class:`QTensor`: integer
    codes with the quantization they were made with (a pre-quantized model's input codes). Codes
    whose quantization is the target's own are taken as they are; others are dequantized and
    quantized again.
    """
    tensors: dict[str, QTensor] = {}
    for name, encoding in model.input_encodings.items():
        if name not in feeds:
            raise InvalidInputError(
                f"input {name!r} is missing; the model takes {', '.join(model.input_encodings)}"
            )
        feed = feeds[name]
        if isinstance(feed, QTensor):
            if _same_linear(feed.encoding, encoding):
                tensors[name] = QTensor(feed.codes, encoding)
                continue
            feed = feed.dequantize()
        x = np.asarray(feed)
        if x.dtype.kind != "f":
            raise InvalidInputError(
                f"input {name!r} has dtype {x.dtype}; pass float data as the float model takes it "
                "(quantization to the target's codes happens inside the simulation)"
            )
        tensors[name] = QTensor(encoding.target_quantize(x.astype(np.float32)), encoding)
    return tensors


def _same_linear(a: Encoding, b: Encoding) -> bool:
    return (
        isinstance(a, LinearEncoding)
        and isinstance(b, LinearEncoding)
        and a.dtype == b.dtype
        and a.axis is None
        and b.axis is None
        and np.array_equal(np.float64(a.scale), np.float64(b.scale))
        and np.array_equal(np.int64(a.zero_point), np.int64(b.zero_point))
    )


def run_lowered(
    model: LoweredModel,
    outputs: tuple[str, ...],
    feeds: Mapping[str, np.ndarray],
    *,
    internals: bool = True,
):
    """Quantize ``feeds`` and run every layer in order; keep every tensor, and every layer's
    internals when ``internals`` (an int64 accumulator is 8 bytes an element: a batch of
    images' accumulators can take far more memory than all its codes)."""
    tensors = quantize_feeds(model, feeds)
    counters: dict[str, Mapping[str, int]] = {}
    kept = KeptInternals()
    for layer in model.layers:
        out = layer.run([tensors[t] for t in layer.inputs])
        tensors[layer.output] = out.tensor
        counters[layer.name] = dict(out.counters)
        if internals:
            kept[layer.name] = dict(out.internals)
    missing = [o for o in outputs if o not in tensors]
    if missing:
        raise InvalidInputError(f"the lowered model does not produce the outputs {missing}")
    return RunResult(
        tensors=KeptTensors(tensors),
        counters=counters,
        outputs={o: tensors[o].dequantize() for o in outputs},
        internals=kept,
    )
