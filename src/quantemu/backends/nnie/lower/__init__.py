"""NNIE lowering: MQBench's NNIE deploy flow on the shared lowering framework.

- :mod:`.options`: :class:`Options` (a :class:`~quantemu.program.options.LoweringOptions`);
- :mod:`.encoding`: :class:`LogEncoding`, how every lowered tensor is stored;
- :mod:`.context`: :class:`NnieContext`, the clip of each tensor and how it is stored;
- :mod:`.rules`: the rule table (op type -> rule, fallback ops, the unsupported error);
- layers by kind: :mod:`.quantized` (``nnie:<Op>``, NNIE clips), :mod:`.codes`
  (``codes:<Op>``, on the codes), :mod:`.fallback` (``float:<Op>``);
- :mod:`.model`: :func:`lower`, :func:`header` and :class:`NnieLoweredModel`.
"""

from quantemu.backends.nnie.lint import lint_graph
from quantemu.backends.nnie.lower.codes import CodeLayer
from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.encoding import LogEncoding, quantize_counted
from quantemu.backends.nnie.lower.fallback import NnieFallbackLayer
from quantemu.backends.nnie.lower.model import NnieLoweredModel, header, lower
from quantemu.backends.nnie.lower.options import (
    ClipSelection,
    GroupedConv,
    LayerInputs,
    Options,
    QuantOverrides,
)
from quantemu.backends.nnie.lower.quantized import NnieLayer, WeightCodes
from quantemu.backends.nnie.lower.rules import RULES, SUPPORTED_OPS

__all__ = [
    "RULES",
    "SUPPORTED_OPS",
    "ClipSelection",
    "CodeLayer",
    "GroupedConv",
    "LayerInputs",
    "LogEncoding",
    "NnieContext",
    "NnieFallbackLayer",
    "NnieLayer",
    "NnieLoweredModel",
    "Options",
    "QuantOverrides",
    "WeightCodes",
    "header",
    "lint_graph",
    "lower",
    "quantize_counted",
]
