"""The JSON report (``quantemu run --json``, ``quantemu demo --json``) and reading it back.

The document is strict JSON (RFC 8259; written with ``allow_nan=False``)::

    {
      "format": "quantemu-evaluation", "version": 1, "quantemu": "0.1.0",
      "model": "digits_cnn.onnx",
      "evaluations": [ Evaluation.to_dict(), ... ],  # one per backend that ran
      "errors": {"nnie": "why it could not run"}      # backends that did not (often empty)
    }

Each evaluation holds ``backend``, ``header``, ``samples``, ``float_accuracy`` and
``backend_accuracy`` (``null`` without labels), ``agreement``, ``counters`` (totals over layers)
and ``layers``: one object per layer with every field of
:class:`~quantemu.simulate.LayerStats` (``lsb_histogram`` counts the LSB error over
-8..8, tails folded into the end bins).

JSON has no infinities: a float that is not finite -- above all the SQNR of a layer that
matches the float model exactly, +inf -- is written as the **string** ``"inf"``, ``"-inf"`` or
``"nan"``. :func:`evaluation_from_dict` turns them back into floats.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from quantemu._version import __version__
from quantemu.documents import check_header, header
from quantemu.errors import InvalidInputError
from quantemu.simulate.evaluate import Evaluation, LayerStats

FORMAT = "quantemu-evaluation"
VERSION = 1

_LAYER_FLOATS = ("sqnr_db", "cosine", "fraction_off")
_EVALUATION_FLOATS = ("float_accuracy", "backend_accuracy", "agreement")


def _encode(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``"inf"``, ``"-inf"`` or ``"nan"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _decode_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise InvalidInputError(f"{where}: expected a number, 'inf', '-inf' or 'nan', got {value!r}")


def evaluation_to_dict(evaluation: Evaluation) -> dict[str, Any]:
    """``evaluation.to_dict()`` with non-finite floats encoded as strings (strict JSON)."""
    return _encode(evaluation.to_dict())


def to_json(
    evaluations: Sequence[Evaluation],
    *,
    model: str = "",
    errors: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole document (see the module docstring) for one or more evaluations."""
    return {
        **header(FORMAT, VERSION),
        "quantemu": __version__,
        "model": model,
        "evaluations": [evaluation_to_dict(ev) for ev in evaluations],
        "errors": {str(k): str(v) for k, v in (errors or {}).items()},
    }


def write_json(
    evaluations: Sequence[Evaluation],
    path: str | os.PathLike,
    *,
    model: str = "",
    errors: Mapping[str, str] | None = None,
) -> None:
    """Write :func:`to_json`'s document to ``path`` (``-`` for stdout)."""
    document = to_json(evaluations, model=model, errors=errors)
    text = json.dumps(document, indent=1, allow_nan=False) + "\n"
    if str(path) == "-":
        import sys  # noqa: PLC0415

        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def evaluation_from_dict(document: Mapping[str, Any]) -> Evaluation:
    """Rebuild an :class:`Evaluation` from :func:`evaluation_to_dict`'s output."""
    try:
        layers = tuple(
            LayerStats(
                name=str(layer["name"]),
                op=str(layer["op"]),
                output=str(layer["output"]),
                exact=bool(layer["exact"]),
                note=str(layer["note"]),
                encoding=str(layer["encoding"]),
                elements=int(layer["elements"]),
                max_abs_lsb=int(layer["max_abs_lsb"]),
                lsb_histogram=tuple(int(v) for v in layer["lsb_histogram"]),
                counters={str(k): int(v) for k, v in layer["counters"].items()},
                step_sqnr_db=tuple(
                    _decode_float(v, f"layer {layer['name']!r} step_sqnr_db")
                    for v in layer.get("step_sqnr_db", ())
                ),
                **{
                    key: _decode_float(layer[key], f"layer {layer['name']!r} {key}")
                    for key in _LAYER_FLOATS
                },
            )
            for layer in document["layers"]
        )
        return Evaluation(
            backend=str(document["backend"]),
            header={str(k): str(v) for k, v in document["header"].items()},
            layers=layers,
            samples=int(document["samples"]),
            **{
                key: _decode_float(document[key], f"evaluation {key}") for key in _EVALUATION_FLOATS
            },
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(
            f"not a quantemu evaluation (missing or malformed field: {exc})"
        ) from None


def load_json(document: Mapping[str, Any]) -> list[Evaluation]:
    """The evaluations of a parsed :func:`to_json` document."""
    check_header(document, FORMAT, VERSION, "evaluation")
    return [evaluation_from_dict(ev) for ev in document.get("evaluations", [])]


def read_json(path: str | os.PathLike) -> list[Evaluation]:
    """The evaluations stored in the file ``path``."""
    with open(path, encoding="utf-8") as source:
        return load_json(json.load(source))
