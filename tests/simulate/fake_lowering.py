"""A stand-in lowering for tests of the simulation front end, reports and commands.

``fake_lowering_module(backend)`` returns an object with a ``lower(graph, ranges, **options)``
like a backend's ``lower.py``: every node runs in float on dequantized inputs and its output is
quantized to int8 with an affine encoding from the calibrated range. Convolutions are marked
exact (op ``fake_conv``), everything else is a float fallback, so reports see both kinds. Each
layer counts the outputs that fell outside the calibrated range as ``output_saturation``.
The only option is ``isa`` (accepted for the ``onednn`` name, an error elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.executor import run_node
from quantemu.simulate import Layer, LayerOutput, LinearEncoding, LoweredModel, QTensor


def _encoding(low: float, high: float) -> LinearEncoding:
    low, high = min(float(np.min(low)), 0.0), max(float(np.max(high)), 0.0)
    scale = (high - low) / 255 if high > low else 1.0
    return LinearEncoding(scale=scale, zero_point=round(-low / scale) - 128, dtype="int8")


@dataclass(frozen=True, kw_only=True)
class FloatLayer(Layer):
    node: Any
    consts: Any
    encoding: LinearEncoding

    def run(self, inputs: list[QTensor]) -> LayerOutput:
        values = iter(q.dequantize() for q in inputs)
        args = [
            None if not n else (self.consts[n] if n in self.consts else next(values))
            for n in self.node.inputs
        ]
        out = run_node(self.node, args)[0]
        enc = self.encoding
        lo = enc.scale * (enc.lo - enc.zero_point)
        hi = enc.scale * (enc.hi - enc.zero_point)
        clipped = int(np.count_nonzero((out < lo - enc.scale / 2) | (out > hi + enc.scale / 2)))
        return LayerOutput(QTensor(enc.quantize(out), enc), {"output_saturation": clipped})


def lower(graph, ranges, backend: str = "fake", **options) -> LoweredModel:
    unknown = set(options) - ({"isa"} if backend == "onednn" else set())
    if unknown:
        raise InvalidInputError(f"{backend}: unknown option(s) {sorted(unknown)}")
    layers = []
    for node in graph.nodes:
        exact = node.op_type == "Conv"
        layers.append(
            FloatLayer(
                name=node.name,
                op="fake_conv" if exact else f"float:{node.op_type}",
                inputs=tuple(n for n in node.inputs if n and n not in graph.initializers),
                output=node.outputs[0],
                exact=exact,
                note="" if exact else f"{node.op_type} runs in float (test lowering)",
                node=node,
                consts=graph.initializers,
                encoding=_encoding(*ranges[node.outputs[0]]),
            )
        )
    return LoweredModel(
        backend=backend,
        input_encodings={i.name: _encoding(*ranges[i.name]) for i in graph.inputs},
        layers=tuple(layers),
        header={"variant": "fake float lowering", "rounding": "half to even", **options},
    )


def fake_lowering_module(backend: str):
    """A module-like object whose ``lower`` is :func:`lower` for ``backend``."""
    from quantemu.backends.registry import known_backends

    if backend not in known_backends():
        raise InvalidInputError(
            f"unknown backend {backend!r}; choose one of {', '.join(known_backends())}"
        )

    def lower_for(graph, ranges, **options):
        return lower(graph, ranges, backend, **options)

    return SimpleNamespace(lower=lower_for, __name__=f"fake.{backend}.lower")
