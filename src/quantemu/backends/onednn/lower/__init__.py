"""Lower a float graph onto oneDNN as PyTorch's x86 quantization (engine ``onednn``) runs it.

``lower(graph, ranges, options) -> LoweredModel``. The scheme is PyTorch's
(``shared/notes/toolchains.md``, oneDNN section); the qparams of every tensor are assigned first
(:mod:`.context`), then :data:`.rules.RULES` lowers node by node:

- weights: ``qint8`` per output channel, symmetric; bias float32, added in f32;
- Conv / Gemm / MatMul: oneDNN's int8 convolution / matmul on ``isa`` and the f32
  requantization of PyTorch's ``quantized::conv2d`` / ``linear`` (page §6), fused ReLU as the
  ``_relu`` ops do (codes ``max(y, zero_point)``) (:mod:`.conv`, :mod:`.linear`);
- Add, AveragePool, GlobalAveragePool, Relu, Clip, MaxPool: PyTorch's ATen quantized kernels
  (:mod:`..aten`), bit for bit (:mod:`.elementwise`, :mod:`.pool`, :mod:`.activation`);
  reshapes move codes (:mod:`.layout`); a Mul by a constant scalar is ``quantized::mul``
  (Scalar), the factor moved into the output's qparams (:mod:`.elementwise`);
- LayerNormalization over the last axis with constant Scale/B: ``quantized::layer_norm``, ATen's
  binary32 kernel bit for bit (:mod:`.norm`, :mod:`..layer_norm`);
- anything else: a float fallback layer (``exact=False``, :mod:`.fallback`) or, with
  ``fallback="error"``, ``UnsupportedError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.lower.context import Context, assign_encodings
from quantemu.backends.onednn.lower.options import FAMILY_OPS, LIBRARY, Fallback, Options, header
from quantemu.backends.onednn.lower.rules import RULES
from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Graph
from quantemu.program import LoweredModel
from quantemu.program.lowering import NotLowerable

__all__ = [
    "LIBRARY",
    "RULES",
    "Context",
    "Fallback",
    "NotLowerable",
    "Options",
    "TorchU8Encoding",
    "assign_encodings",
    "header",
    "lower",
]


def lower(graph: Graph, ranges: Mapping[str, Any], options: Options | None = None) -> LoweredModel:
    """Lower ``graph`` (optimized) with calibrated ``ranges`` (tensor -> (min, max)) and typed
    ``options`` (:class:`Options`, the defaults for None; ``Options.from_mapping`` types names
    and text)."""
    opts = Options.checked(options)
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"lower: graph must be a quantemu Graph, got {type(graph)}")
    _check_named_layers(graph, opts)
    ctx = Context.create(graph, ranges, opts)
    return LoweredModel(
        backend="onednn",
        input_encodings={i.name: ctx.encodings[i.name] for i in graph.inputs},
        layers=RULES.lower_graph(ctx),
        header=header(opts),
    )


def _check_named_layers(graph: Graph, opts: Options) -> None:
    """Every node a per-layer family option names exists and has the right op."""
    for name, ops in FAMILY_OPS.items():
        value = getattr(opts, name)
        if not isinstance(value, Mapping):
            continue
        nodes = {n.name for n in graph.nodes if n.op_type in ops}
        unknown = sorted(set(value) - nodes)
        if unknown:
            raise InvalidInputError(
                f"option {name} names {', '.join(map(repr, unknown))}, which are not "
                f"{'/'.join(ops)} nodes of the graph; those are: {', '.join(sorted(nodes))}"
            )
