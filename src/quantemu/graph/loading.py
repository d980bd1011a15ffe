"""One entry point for model files: ONNX or TFLite, chosen by the file itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Graph

#: The suffixes :func:`load_model` reads, for messages.
MODEL_SUFFIXES = (".onnx", ".tflite")


def is_tflite(source: Any) -> bool:
    """True for TFLite bytes (file identifier ``TFL3``) or a path to such a file."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[4:8]) == b"TFL3"
    if isinstance(source, str | Path):
        path = Path(source)
        if path.suffix == ".tflite":
            return True
        try:
            with path.open("rb") as f:
                return f.read(8)[4:8] == b"TFL3"
        except OSError:
            return False
    return False


#: The model name every command and loader accepts for the built-in digits CNN.
DEMO = "demo"


def resolve_demo(source: Any) -> Any:
    """The built-in model's path for ``"demo"`` (when no file of that name exists), else
    ``source`` unchanged."""
    if isinstance(source, str) and source == DEMO and not Path(source).exists():
        from quantemu.data import demo_model_path  # noqa: PLC0415 (keeps import light)

        return demo_model_path()
    return source


def load_model(source: Any, *, shapes: Mapping[str, Sequence] | None = None) -> Graph:
    """A :class:`Graph` from an ONNX or TFLite model (path, bytes, or ``onnx.ModelProto``);
    ``"demo"`` is the built-in digits CNN, as on the command line. ``shapes`` binds input
    dimensions (see :meth:`Graph.with_input_shapes`); an ONNX model binds them before its shape
    computations fold, where they are needed."""
    if isinstance(source, Graph):
        return source.with_input_shapes(shapes) if shapes else source
    source = resolve_demo(source)
    if is_tflite(source):
        from quantemu.graph.tflite_import import load_tflite  # noqa: PLC0415 (imports tflite)

        graph = load_tflite(source)
        return graph.with_input_shapes(shapes) if shapes else graph
    if isinstance(source, str | Path) and not Path(source).exists():
        raise InvalidInputError(
            f"model file {source} does not exist (models: {', '.join(MODEL_SUFFIXES)} files)"
        )
    from quantemu.graph.onnx_import import load_onnx  # noqa: PLC0415 (imports onnx)

    return load_onnx(source, shapes=shapes)
