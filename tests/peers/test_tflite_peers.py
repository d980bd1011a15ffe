"""Live comparisons with the real runtimes, on fresh random inputs (not the stored vectors).

- LiteRT's reference kernels (``ai_edge_litert``, ``OpResolverType.BUILTIN_REF``) against the
  ``tflite`` backend;
- TFLite-Micro (``tflite_micro``) against ``tflite`` with ``runtime=tflite_micro``;
- XMOS's host interpreter (``xmos_ai_tools.xinterpreters``) on the compiled ``.xcore.tflite``
  against the ``xs3`` backend on the int8 model (xformer path).

Each test skips cleanly where its package is missing (``pip install 'quantemu[peers]'``).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

import quantemu

pytestmark = pytest.mark.peer

ROOT = Path(__file__).resolve().parents[1] / "data"
SETS = {"models_xs3_public": ROOT / "models_xs3_public", "tflite_refs": ROOT / "tflite_refs"}
MODELS = [
    (folder, name)
    for folder, path in SETS.items()
    for name in sorted(json.loads((path / "MANIFEST.json").read_text())["models"])
]
IDS = [f"{f}/{n}" for f, n in MODELS]
# Where xcore-opt or XMOS's runtime rejects a model (it segfaults on a missing builtin kernel),
# the generator records why in the manifest's notes instead of y_xcore.
XMOS_REFUSED = {
    (folder, name): notes.get("xcore_opt") or notes.get("y_xcore")
    for folder, path in SETS.items()
    for name, entry in json.loads((path / "MANIFEST.json").read_text())["models"].items()
    if {"xcore_opt", "y_xcore"} & set(notes := entry.get("notes", {}))
}


def _inputs(folder: str, name: str, n: int = 4) -> np.ndarray:
    shape = np.load(SETS[folder] / f"{name}.npz")["x_int8"].shape[1:]
    seed = zlib.crc32(f"{folder}/{name}".encode())  # fixed per model, unlike the stored inputs
    return np.random.default_rng(seed).integers(-128, 128, (n, *shape), dtype=np.int8)


def _run_each(invoke, x: np.ndarray) -> np.ndarray:
    return np.stack([invoke(sample[None])[0] for sample in x])


@pytest.mark.parametrize(("folder", "name"), MODELS, ids=IDS)
def test_litert_reference_kernels(folder, name):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    path = SETS[folder] / f"{name}.int8.tflite"
    it = litert.Interpreter(
        model_content=path.read_bytes(),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
    )
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

    def invoke(sample):
        it.set_tensor(i, sample)
        it.invoke()
        return it.get_tensor(o)

    x = _inputs(folder, name)
    program = quantemu.compile(path, "tflite")
    ours = program.run(x).tensors[program.graph.outputs[0]].codes
    assert np.array_equal(ours, _run_each(invoke, x))


@pytest.mark.parametrize(("folder", "name"), MODELS, ids=IDS)
def test_tflite_micro(folder, name):
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    path = SETS[folder] / f"{name}.int8.tflite"
    it = runtime.Interpreter.from_bytes(path.read_bytes(), arena_size=8 << 20)

    def invoke(sample):
        it.set_input(sample, 0)
        it.invoke()
        return it.get_output(0)

    x = _inputs(folder, name)
    program = quantemu.compile(path, "tflite", runtime="tflite_micro")
    ours = program.run(x).tensors[program.graph.outputs[0]].codes
    assert np.array_equal(ours, _run_each(invoke, x))


@pytest.mark.parametrize(("folder", "name"), MODELS, ids=IDS)
def test_xmos_host_interpreter(folder, name):
    xinterpreters = pytest.importorskip("xmos_ai_tools.xinterpreters")
    if (folder, name) in XMOS_REFUSED:
        pytest.skip(f"no XMOS run possible (MANIFEST notes): {XMOS_REFUSED[folder, name]}")
    compiled = (SETS[folder] / f"{name}.xcore.tflite").read_bytes()
    it = xinterpreters.TFLMHostInterpreter()
    it.set_model(model_content=compiled)
    i = it.get_input_details()[0]["index"]
    o = it.get_output_details()[0]["index"]

    def invoke(sample):
        it.set_tensor(i, sample)
        it.invoke()
        return it.get_tensor(o)

    x = _inputs(folder, name)
    program = quantemu.compile(SETS[folder] / f"{name}.int8.tflite", "xs3")
    ours = program.run(x).tensors[program.graph.outputs[0]].codes
    assert np.array_equal(ours, _run_each(invoke, x))
