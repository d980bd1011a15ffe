"""Whole-model simulation: lowered programs, running them, and comparing with the float model.

``quantemu.compile(graph, backend=..., calib=data, **options)`` returns a
:class:`~quantemu.simulate.compile.Program`; ``program.run(x)`` runs the integer program and
``program.evaluate(x, labels)`` gives per-layer statistics (:class:`Evaluation`).
"""

from quantemu.program import (
    Encoding,
    Layer,
    LayerOutput,
    LinearEncoding,
    LoweredModel,
    QTensor,
    RunResult,
    run_lowered,
)
from quantemu.simulate.compile import Program, compile_model
from quantemu.simulate.evaluate import Evaluation, LayerStats, evaluate

__all__ = [
    "Encoding",
    "Evaluation",
    "Layer",
    "LayerOutput",
    "LayerStats",
    "LinearEncoding",
    "LoweredModel",
    "Program",
    "QTensor",
    "RunResult",
    "compile_model",
    "evaluate",
    "run_lowered",
]
