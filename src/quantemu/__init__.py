"""quantemu: bit-exact emulation of quantized inference targets.

The layers, from the bottom up: :mod:`quantemu.intmath` (exact integer primitives),
:mod:`quantemu.backends` (per-target operators), :mod:`quantemu.conformance` (vectors from real
implementations and the runner that checks the emulation against them), :mod:`quantemu.graph`
(model import, graph passes, float reference executor), :mod:`quantemu.calibration` and
:mod:`quantemu.simulate` (whole-model simulation).

``quantemu.load_onnx``, ``quantemu.load_tflite``, ``quantemu.load_model`` (either format),
``quantemu.calibrate``, ``quantemu.compile`` and ``quantemu.prepare`` (the graph a backend's
toolchain calibrates) are loaded on first use, so ``import quantemu``
stays light (it does not import onnx).
"""

from typing import Any

from quantemu._version import __version__

__all__ = [
    "__version__",
    "calibrate",
    "compile",
    "load_model",
    "load_onnx",
    "load_tflite",
    "prepare",
]


def __getattr__(name: str) -> Any:
    if name in ("load_onnx", "load_tflite", "load_model"):
        from quantemu import graph  # noqa: PLC0415 (lazy: graph loads its importers on first use)

        return getattr(graph, name)
    if name == "calibrate":
        from quantemu.calibration.api import calibrate  # noqa: PLC0415 (lazy: imports onnx)

        return calibrate
    if name in ("compile", "prepare"):
        from quantemu.simulate import compile as compiling  # noqa: PLC0415 (imports onnx)

        return compiling.compile_model if name == "compile" else compiling.prepare
    raise AttributeError(f"module 'quantemu' has no attribute {name!r}")
