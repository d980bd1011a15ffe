"""PRELU live: the stored single-op models (``tests/backends/tflite/prelu_peer_vectors.json``)
on fresh int8 inputs through LiteRT's reference kernels, TFLite-Micro and, compiled by
xcore-opt (which keeps PRELU as a builtin), XMOS's host interpreter, against the ``tflite``
kernel with each runtime's Prepare. Each test skips without its peer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.tflite.prelu import prelu_int8, prelu_params
from tests.peers.runtimes import on_litert, on_tflite_micro, on_xmos

pytestmark = pytest.mark.peer

PATH = Path(__file__).resolve().parents[1] / "backends" / "tflite" / "prelu_peer_vectors.json"
CASES = json.loads(PATH.read_text())["cases"]


def _fresh(case: dict, index: int, runtime: TfliteRuntime):
    h, w, c = case["input_nhwc"]
    x = np.random.default_rng(400 + index).integers(-128, 128, (2, 1, h, w, c), dtype=np.int8)
    alpha = np.frombuffer(bytes.fromhex(case["alpha"]), np.int8).reshape(case["alpha_shape"])
    s_alpha, z_alpha = case["alpha_quant"]
    q = (*case["input_quant"], *case["output_quant"])
    p = prelu_params(*q, s_alpha=s_alpha, z_alpha=z_alpha, runtime=runtime)
    want, _ = prelu_int8(x, alpha, p)
    return x, want


@pytest.mark.parametrize("index", range(len(CASES)))
def test_litert_and_tflite_micro(index):
    x, want_litert = _fresh(CASES[index], index, TfliteRuntime.LITERT_REFERENCE)
    _, want_micro = _fresh(CASES[index], index, TfliteRuntime.TFLITE_MICRO)
    blob = bytes.fromhex(CASES[index]["model"])
    np.testing.assert_array_equal(on_litert(blob, x), want_litert)
    np.testing.assert_array_equal(on_tflite_micro(blob, x), want_micro)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_xmos_host_interpreter(index, tmp_path):
    x, want = _fresh(CASES[index], index, TfliteRuntime.TFLITE_MICRO)
    np.testing.assert_array_equal(on_xmos(bytes.fromhex(CASES[index]["model"]), x, tmp_path), want)
