"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR live: the stored single-op models
(``tests/backends/tflite/resize_peer_vectors.json``) on fresh int8 inputs through LiteRT's
reference kernels, TFLite-Micro and, compiled by xcore-opt, XMOS's host interpreter, against
the ``tflite`` kernels (XMOS: with ``half_pixel_centers`` dropped from a nearest resize, as its
runtime runs it; ``xs3/xformer/lower/refusals.py``). Each test skips without its peer."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.tflite.resize import ResizeParams, resize_bilinear, resize_nearest

pytestmark = pytest.mark.peer

PATH = Path(__file__).resolve().parents[1] / "backends" / "tflite" / "resize_peer_vectors.json"
CASES = json.loads(PATH.read_text())["cases"]


def _fresh(case: dict, index: int):
    h, w, c = case["input_nhwc"]
    x = np.random.default_rng(300 + index).integers(-128, 128, (2, 1, h, w, c), dtype=np.int8)
    params = ResizeParams(
        tuple(case["size"]),
        case["align_corners"],
        case["half_pixel_centers"],
        bilinear=case["op"] == "bilinear",
    )
    return x, params


def _ours(x: np.ndarray, params: ResizeParams) -> np.ndarray:
    kernel = resize_bilinear if params.bilinear else resize_nearest
    return kernel(x[:, 0].transpose(0, 3, 1, 2), params).transpose(0, 2, 3, 1)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_litert_and_tflite_micro(index):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    case = CASES[index]
    blob = bytes.fromhex(case["model"])
    x, params = _fresh(case, index)
    it = litert.Interpreter(
        model_content=blob, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    micro = runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)
    for sample, want in zip(x, _ours(x, params), strict=True):
        it.set_tensor(it.get_input_details()[0]["index"], sample)
        it.invoke()
        micro.set_input(sample, 0)
        micro.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"])[0], want)
        assert np.array_equal(micro.get_output(0)[0], want)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_xmos_host_interpreter(index):
    xformer = pytest.importorskip("xmos_ai_tools.xformer")
    xinterpreters = pytest.importorskip("xmos_ai_tools.xinterpreters")
    case = CASES[index]
    x, params = _fresh(case, index)
    if not params.bilinear:
        params = dataclasses.replace(params, half_pixel_centers=False)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "m.tflite", Path(tmp) / "m.xcore.tflite"
        src.write_bytes(bytes.fromhex(case["model"]))
        xformer.convert(str(src), str(out), {})
        compiled = out.read_bytes()
    it = xinterpreters.TFLMHostInterpreter()
    it.set_model(model_content=compiled)
    for sample, want in zip(x, _ours(x, params), strict=True):
        it.set_tensor(it.get_input_details()[0]["index"], sample)
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"])[0], want)
