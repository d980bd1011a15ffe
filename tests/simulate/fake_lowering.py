"""A stand-in lowering for tests of the simulation front end, reports and commands.

``install_fake_backends(monkeypatch)`` replaces every registered backend with a
:func:`fake_spec`, whose lowering is :func:`lower`: every node runs in float on dequantized
inputs and its output is quantized to int8 with an affine encoding from the calibrated
range. Convolutions are marked exact (op ``fake_conv``), everything else is a float
fallback, so reports see both kinds. Each layer counts the outputs that fell outside the
calibrated range as ``output_saturation``. The only option is ``isa`` (accepted for the
``onednn`` name, an error elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar  # noqa: F401 (ClassVar: the generated options classes)

import numpy as np

from quantemu.backends.registry import BackendSpec
from quantemu.graph.executor import run_node
from quantemu.program import Layer, LayerOutput, LinearEncoding, LoweredModel, QTensor
from quantemu.program.options import LoweringOptions


def _encoding(low: float, high: float) -> LinearEncoding:
    low, high = min(float(np.min(low)), 0.0), max(float(np.max(high)), 0.0)
    scale = (high - low) / 255 if high > low else 1.0
    return LinearEncoding(scale=scale, zero_point=round(-low / scale) - 128, dtype="int8")


@dataclass(frozen=True, kw_only=True)
class FloatLayer(Layer):
    node: Any
    consts: Any
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
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


def _options_class(backend: str) -> type[LoweringOptions]:
    """Typed options like a real backend's: ``isa`` for the ``onednn`` name, none elsewhere."""
    annotations = {"backend": "ClassVar[str]"}
    namespace: dict[str, Any] = {"backend": backend, "__annotations__": annotations}
    if backend == "onednn":
        annotations["isa"] = "str | None"
        namespace["isa"] = None
    return dataclass(frozen=True)(type(f"Fake{backend}Options", (LoweringOptions,), namespace))


def fake_spec(backend: str, error: Exception | None = None) -> BackendSpec:
    """A registry entry for ``backend`` that lowers with :func:`lower` (or raises ``error``)."""

    def lower_for(graph, ranges, options):
        if error is not None:
            raise error
        given = {k: v for k, v in options.describe().items() if getattr(options, k) is not None}
        return lower(graph, ranges, backend, **given)

    return BackendSpec(
        name=backend,
        target="fake target (tests)",
        scheme="fake scheme (tests)",
        options=_options_class(backend),
        lower=lower_for,
        header=lambda options: {},
    )


def install_fake_backends(monkeypatch, errors: dict[str, Exception] | None = None) -> None:
    """Replace every registered backend with :func:`fake_spec` for the test's duration."""
    from quantemu.backends import registry

    for name in registry.known_backends():
        monkeypatch.setitem(registry._BACKENDS, name, fake_spec(name, (errors or {}).get(name)))
