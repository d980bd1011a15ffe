"""``quantemu.compile``: quantize a float model for a target, the way its toolchain does.

``prog = quantemu.compile(graph, backend="xs3", calib=x_calib, **options)`` optimizes the float
graph (batch-norm folding, activation fusion, ...), calibrates every tensor on ``calib``, and
hands both to the backend's ``lower()``, which derives the integer parameters with the vendor's
rules and chooses the target operators. ``prog.run(x)`` then runs the integer program;
``prog.evaluate(x, labels)`` compares it layer by layer with the float model.
"""

from __future__ import annotations

from typing import Any

from quantemu.backends.registry import backend_spec
from quantemu.calibration.ranges import CalibrationRanges
from quantemu.graph import Graph, optimize
from quantemu.simulate.compiled import RANGES_KEY, Program
from quantemu.simulate.plan import (
    OptionsLike,
    carried_ranges,
    load_graph,
    plan_model,
    typed_options,
)

__all__ = [
    "RANGES_KEY",
    "Program",
    "carried_ranges",
    "compile_model",
    "needs_calibration",
    "prepare",
]


def needs_calibration(backend: str, options: OptionsLike = None) -> bool:
    """Whether ``backend`` lowered with ``options`` uses calibrated activation ranges (False
    for a floating-point pipeline such as nvdla's ``precision="fp16"``)."""
    return backend_spec(backend).needs_calibration(typed_options(backend, options))


def prepare(model, /, backend: str, **options: Any) -> Graph:
    """``model`` optimized and rewritten as ``backend``'s toolchain does before calibration
    (the graph ``quantemu.compile`` calibrates and lowers)."""
    opts = typed_options(backend, options)
    return backend_spec(backend).prepared(optimize(load_graph(model)), opts)


def compile_model(
    model,
    /,
    backend: str,
    calib=None,
    *,
    observer: str = "minmax",
    calibration: CalibrationRanges | None = None,
    progress: bool | None = None,
    **options: Any,
) -> Program:
    """Lower ``model`` (a Graph, an ONNX or a TFLite path) onto ``backend`` (module docstring).

    ``calib``: calibration data (anything ``quantemu.calibrate`` accepts); not needed when
    precomputed ``calibration`` ranges are given, nor for a fully quantized model (an int8
    TFLite file), whose own quantization is used, nor where the options select a pipeline
    that uses no ranges (``precision="fp16"`` on nvdla), which ignores it. ``options`` go to
    the backend's lowering (e.g. ``isa="avx2"`` for onednn, ``model="device"`` for xs3:
    ``model`` is positional-only here so that backend options may use the name); unknown ones
    are errors.
    """
    plan = plan_model(
        model,
        backend,
        calib,
        options=options,
        calibration=calibration,
        observer=observer,
        progress=progress,
    )
    return plan.lower()
