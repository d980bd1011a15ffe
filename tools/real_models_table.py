"""Print the real-model corpus's measurements as the README's Markdown table.

    .venv/bin/python tools/fetch_real_models.py     # once: the corpus, into the cache
    .venv/bin/python tools/real_models_table.py     # the table, on stdout

The checks are ``tests/real/checks.py``'s, the ones ``tests/real/test_real_models.py`` asserts:
import as shipped (input shapes bound only where the importer asks for them), the float
executor against the runtime the package ships the model for (onnxruntime, LiteRT), and each
backend's exact layers after ``quantemu.compile`` and one run, or its refusal. An int8 TFLite
model is compared code for code with LiteRT's reference kernels (``tflite``) and XMOS's
interpreter on xcore-opt's output (``xs3``) instead.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.real import checks

CELL = 70


def _short(text: str) -> str:
    """A table cell: the operators a refusal lists, else its first line, cut to CELL."""
    ops = checks.listed(text)
    text = ", ".join(ops) if ops else checks.gist(text)
    text = text.replace("|", "/")
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


def _imported(imported: checks.Imported) -> str:
    if imported.graph is not None:
        return "yes, shapes bound" if imported.bound else "yes"
    return f"no: {_short(imported.refusal or imported.raw)}"


def _float(graph, entry: dict, name: str) -> str:
    try:
        diff, scale = checks.float_difference(graph, entry, name)
    except Exception as exc:  # a failure is a measurement here, printed as such
        return f"failed: {_short(f'{type(exc).__name__}: {exc}')}"
    return f"max abs diff {diff:.1e} (outputs up to {scale:.2g})"


def _backend(graph, backend: str, name: str, entry: dict) -> str:
    outcome = checks.lower_and_run(graph, backend, name, entry)
    if outcome.raw:
        return f"BUG: {_short(outcome.raw)}"
    if outcome.refusal:
        return f"refused: {_short(outcome.refusal)}"
    note = f" ({outcome.note})" if outcome.note else ""
    return f"{outcome.exact}/{outcome.total} exact{note}"


def _int8(name: str, entry: dict) -> dict[str, str]:
    """tflite vs LiteRT's reference kernels, xs3 vs XMOS's interpreter: codes equal or not."""
    x = checks.inputs(name, entry)
    ours = checks.int8_codes(entry, "tflite", x)
    same = all(map(np.array_equal, ours, checks.litert_codes(entry, x)))
    cells = {"tflite": "codes == LiteRT BUILTIN_REF" if same else "codes DIFFER from LiteRT"}
    theirs = checks.xmos_codes(entry, x)
    if isinstance(theirs, str):
        cells["xs3"] = f"xcore-opt refuses: {_short(theirs)}"
    else:
        same = all(map(np.array_equal, checks.int8_codes(entry, "xs3", x), theirs))
        cells["xs3"] = "codes == XMOS interpreter" if same else "codes DIFFER from XMOS"
    return cells


def row(name: str, entry: dict) -> list[str]:
    imported = checks.import_model(entry)
    graph = imported.graph
    cells = {"import": _imported(imported)}
    if graph is not None:
        cells["float"] = _float(graph, entry, name)
        if checks.is_int8(entry):
            cells.update(_int8(name, entry))
        else:
            cells.update({b: _backend(graph, b, name, entry) for b in checks.BACKENDS})
    model = f"{name} ({entry['package']} {entry['version']}: {entry['task']})"
    columns = ("import", "float", *checks.BACKENDS)
    return [model, *(cells.get(column, "") for column in columns)]


def main() -> None:
    models = checks.manifest()
    if sys.argv[1:]:  # a few models by name, e.g. to re-measure them
        models = {name: models[name] for name in sys.argv[1:] if name in models}
    if not models:
        raise SystemExit("no corpus: run .venv/bin/python tools/fetch_real_models.py first")
    header = ["model", "import", "float vs onnxruntime/LiteRT", *checks.BACKENDS]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    start = time.monotonic()
    for name, entry in models.items():
        if not checks.model_path(entry).exists():
            print(f"| {name} | not in the cache |" + " |" * (len(header) - 2))
            continue
        print("| " + " | ".join(row(name, entry)) + " |", flush=True)
    print(f"\n({len(models)} models, {time.monotonic() - start:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
