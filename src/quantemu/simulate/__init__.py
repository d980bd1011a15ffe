"""Whole-model simulation: lowered programs, running them, and comparing with the float model.

``quantemu.compile(graph, backend=..., calib=data, **options)`` returns a
:class:`~quantemu.simulate.compiled.Program`; ``program.run(x)`` runs the integer program and
``program.evaluate(x, labels)`` gives per-layer statistics (:class:`Evaluation`). Both go
through one :class:`~quantemu.simulate.plan.BackendPlan` per backend (:mod:`.plan`); a
:class:`~quantemu.simulate.session.Session` runs one model on several backends (:mod:`.session`).
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
from quantemu.simulate.plan import BackendPlan, RangeSource
from quantemu.simulate.session import Outcome, Session

__all__ = [
    "BackendPlan",
    "Encoding",
    "Evaluation",
    "Layer",
    "LayerOutput",
    "LayerStats",
    "LinearEncoding",
    "LoweredModel",
    "Outcome",
    "Program",
    "QTensor",
    "RangeSource",
    "RunResult",
    "Session",
    "compile_model",
    "evaluate",
    "run_lowered",
]
