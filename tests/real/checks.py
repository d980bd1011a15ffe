"""The checks run on every model of the real-model corpus (``tools/fetch_real_models.py``).

Shared by ``tests/real/test_real_models.py`` (which asserts what must hold) and
``tools/real_models_table.py`` (which prints what was measured), so the table in the README is
what the tests check. Nothing here downloads: a model missing from the cache is reported as
missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import quantemu
from quantemu.errors import InvalidInputError, UnsupportedError

BACKENDS = ("xs3", "nvdla", "onednn", "nnie", "tflite")
QUANTEMU_ERRORS = (InvalidInputError, UnsupportedError)
CALIB_SAMPLES = 4
# What tells that an import failed only for want of bound input dimensions: the remedy the
# importer names. The corpus then binds the manifest's shapes, as a user following it would.
BIND_HINT = "bind the input's dimensions"


def cache_dir() -> Path:
    """The corpus: $QUANTEMU_REAL_MODELS, else ~/.cache/quantemu/real-models (as the fetcher)."""
    default = Path.home() / ".cache" / "quantemu" / "real-models"
    return Path(os.environ.get("QUANTEMU_REAL_MODELS") or default)


def manifest() -> dict:
    """The fetched manifest's models, or {} where nothing was fetched."""
    path = cache_dir() / "manifest.json"
    return json.loads(path.read_text())["models"] if path.exists() else {}


def model_path(entry: dict) -> Path:
    return cache_dir() / entry["file"]


def inputs(name: str, entry: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """One deterministic sample per input, as the manifest says to fill it."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + seed)
    out = {}
    for key, spec in entry["inputs"].items():
        shape, dtype, fill = tuple(spec["shape"]), np.dtype(spec["dtype"]), spec["fill"]
        if fill == "normal":
            value = rng.standard_normal(shape)
        elif fill == "image":
            value = rng.random(shape)
        elif fill == "int8":
            value = rng.integers(-128, 128, shape)
        elif fill == "zeros":
            value = np.zeros(shape)
        else:
            value = np.full(shape, fill)
        out[key] = value.astype(dtype)
    return out


def is_int8(entry: dict) -> bool:
    """A fully quantized TFLite model: its own quantization, compared code for code."""
    return entry["format"] == "tflite" and all(
        spec["dtype"] == "int8" for spec in entry["inputs"].values()
    )


def shapes(entry: dict) -> dict[str, tuple]:
    """The manifest's input shapes with a batch of 1 left free (None), so that calibration may
    stack samples; an input without a leading batch of 1 keeps its shape."""
    return {
        key: (None, *spec["shape"][1:]) if spec["shape"][:1] == [1] else tuple(spec["shape"])
        for key, spec in entry["inputs"].items()
    }


def _bound(graph, entry: dict):
    """The graph with its input dimensions beyond the batch bound where it left them symbolic
    (PaddleOCR's exports: N x 3 x H x W), as the lowering asks for."""
    loose = any(not isinstance(d, int) for t in graph.inputs for d in t.shape[1:])
    return graph.with_input_shapes(shapes(entry)) if loose else graph


@dataclass
class Imported:
    """How the model imported: ``graph`` or the quantemu error's ``refusal``; ``bound`` when
    it imported only with the manifest's input shapes bound; ``raw`` a non-quantemu exception
    (a bug: the rules want a quantemu error naming the cause)."""

    graph: object = None
    refusal: str = ""
    bound: bool = False
    raw: str = ""


def import_model(entry: dict) -> Imported:
    """``quantemu.load_model`` as shipped (strict); where it asks for bound input dimensions,
    again with the manifest's shapes, the batch left free, then fixed to the manifest's 1
    (a Shape over the batch folds only then)."""
    path = str(model_path(entry))
    try:
        return Imported(graph=_bound(quantemu.load_model(path), entry))
    except QUANTEMU_ERRORS as exc:
        if BIND_HINT not in str(exc):
            return Imported(refusal=str(exc))
    except Exception as exc:
        return Imported(raw=f"{type(exc).__name__}: {exc}")
    fixed = {key: tuple(spec["shape"]) for key, spec in entry["inputs"].items()}
    refusal = ""
    for bound in (shapes(entry), fixed):
        try:
            return Imported(graph=quantemu.load_model(path, shapes=bound), bound=True)
        except QUANTEMU_ERRORS as exc:
            refusal = str(exc)
        except Exception as exc:
            return Imported(raw=f"{type(exc).__name__}: {exc}", bound=True)
    return Imported(refusal=refusal, bound=True)


def reference_float(entry: dict, x: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The shipped file run by its own runtime: onnxruntime, or LiteRT for a float TFLite."""
    path = str(model_path(entry))
    if entry["format"] == "onnx":
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return session.run(None, x)
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], x[detail["name"]])
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def float_difference(graph, entry: dict, name: str) -> tuple[float, float]:
    """(max abs difference, largest reference magnitude) over every output, ours vs the runtime
    the package ships the model for, on one deterministic sample."""
    x = inputs(name, entry)
    ours = graph.run_float(x)
    want = reference_float(entry, x)
    diff = scale = 0.0
    for out, ref in zip(ours.values(), want, strict=True):
        got = np.asarray(out, np.float64).reshape(np.shape(ref))
        diff = max(diff, float(np.max(np.abs(got - ref), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(ref), initial=0.0)))
    return diff, scale


@dataclass
class Lowered:
    """One backend's outcome: ``exact``/``total`` layers after a run, or the ``refusal``; a
    non-quantemu exception is kept in ``raw``."""

    exact: int = 0
    total: int = 0
    refusal: str = ""
    raw: str = ""
    note: str = ""


def calibration(name: str, entry: dict) -> dict[str, np.ndarray]:
    """CALIB_SAMPLES samples stacked on the leading axis where every input has a batch of 1;
    one sample otherwise (a recurrent state's batch is not its leading axis)."""
    samples = [inputs(name, entry, seed=1 + i) for i in range(CALIB_SAMPLES)]
    if any(not spec["shape"] or spec["shape"][0] != 1 for spec in entry["inputs"].values()):
        return samples[0]
    return {key: np.concatenate([s[key] for s in samples]) for key in samples[0]}


def _compile(graph, backend: str, name: str, entry: dict):
    """The program, calibrated on CALIB_SAMPLES samples; on one where the model's fixed batch
    of 1 refuses stacked calibration samples (the Lowered's ``note`` says so)."""
    if is_int8(entry):
        return quantemu.compile(graph, backend, progress=False), ""
    try:
        return quantemu.compile(graph, backend, calib=calibration(name, entry), progress=False), ""
    except InvalidInputError as exc:
        if "pass it exactly as the model takes it" not in str(exc):
            raise
    program = quantemu.compile(graph, backend, calib=inputs(name, entry, 1), progress=False)
    return program, "calibrated on 1 sample (fixed batch of 1)"


def lower_and_run(graph, backend: str, name: str, entry: dict) -> Lowered:
    """``quantemu.compile`` on ``backend`` with a few calibration samples, then one run."""
    try:
        program, note = _compile(graph, backend, name, entry)
        program.run(inputs(name, entry))
    except QUANTEMU_ERRORS as exc:
        return Lowered(refusal=str(exc))
    except Exception as exc:
        return Lowered(raw=f"{type(exc).__name__}: {exc}")
    layers = program.lowered.layers
    return Lowered(exact=sum(layer.exact for layer in layers), total=len(layers), note=note)


def int8_codes(entry: dict, backend: str, x: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Our output codes for an int8 TFLite model on ``backend`` (its own quantization)."""
    program = quantemu.compile(str(model_path(entry)), backend, progress=False)
    tensors = program.run(x).tensors
    return [tensors[name].codes for name in program.graph.outputs]


def litert_codes(entry: dict, x: dict[str, np.ndarray]) -> list[np.ndarray]:
    """LiteRT's reference kernels (BUILTIN_REF) on the shipped int8 file."""
    from ai_edge_litert import interpreter as litert

    it = litert.Interpreter(
        model_path=str(model_path(entry)),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
    )
    it.allocate_tensors()
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], x[detail["name"]])
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def xmos_codes(entry: dict, x: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """XMOS's host interpreter on the file as xcore-opt 1.4.2 compiles it, or xcore-opt's
    reason where it does not."""
    from xmos_ai_tools import xinterpreters

    # xcore-opt sits beside this interpreter in the venv.
    xcore_opt = Path(sys.executable).parent / "xcore-opt"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.xcore.tflite"
        done = subprocess.run(
            [str(xcore_opt), "-o", str(out), str(model_path(entry))],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode or not out.exists():
            return (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        it = xinterpreters.TFLMHostInterpreter()
        it.set_model(model_content=out.read_bytes())
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], x[detail["name"]])
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def listed(text: str) -> list[str]:
    """The operator types of a refusal's listing (its lines ``  - Op xN (...)``)."""
    return [line[4:].split(" (")[0] for line in text.splitlines() if line.startswith("  - ")]


def gist(text: str) -> str:
    """A refusal's gist for a message: its first line, the model's path left out, and the
    operator types it lists."""
    head = (text.strip().splitlines() or [""])[0].replace(str(cache_dir()) + "/", "")
    if ops := listed(text):
        return f"{head.rstrip(':')}: {', '.join(ops)}"
    return head if len(head) <= 160 else head[:159] + "…"
