"""PRELU live: the stored single-op models (``tests/backends/tflite/prelu_peer_vectors.json``)
on fresh int8 inputs through LiteRT's reference kernels, TFLite-Micro and, compiled by
xcore-opt (which keeps PRELU as a builtin), XMOS's host interpreter, against the ``tflite``
kernel with each runtime's Prepare. Each test skips without its peer."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.tflite.prelu import prelu_int8, prelu_params

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


def _outputs(invoke, x: np.ndarray) -> np.ndarray:
    """``invoke(sample) -> output`` over the samples, stacked."""
    return np.stack([invoke(sample) for sample in x])


@pytest.mark.parametrize("index", range(len(CASES)))
def test_litert_and_tflite_micro(index):
    x, want_litert = _fresh(CASES[index], index, TfliteRuntime.LITERT_REFERENCE)
    _, want_micro = _fresh(CASES[index], index, TfliteRuntime.TFLITE_MICRO)
    blob = bytes.fromhex(CASES[index]["model"])
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    ref = litert.Interpreter(
        model_content=blob, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    ref.allocate_tensors()
    micro = runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)
    (src,), (dst,) = ref.get_input_details(), ref.get_output_details()

    def on_litert(sample):
        ref.set_tensor(src["index"], sample)
        ref.invoke()
        return ref.get_tensor(dst["index"])

    def on_micro(sample):
        micro.set_input(sample, 0)
        micro.invoke()
        return micro.get_output(0)

    np.testing.assert_array_equal(_outputs(on_litert, x), want_litert)
    np.testing.assert_array_equal(_outputs(on_micro, x), want_micro)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_xmos_host_interpreter(index, tmp_path):
    x, want = _fresh(CASES[index], index, TfliteRuntime.TFLITE_MICRO)
    xformer = pytest.importorskip("xmos_ai_tools.xformer")
    xinterpreters = pytest.importorskip("xmos_ai_tools.xinterpreters")
    # xcore-opt runs its tools from the interpreter's bin directory
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    (tmp_path / "prelu.tflite").write_bytes(bytes.fromhex(CASES[index]["model"]))
    xformer.convert(str(tmp_path / "prelu.tflite"), str(tmp_path / "prelu.xcore.tflite"), {})
    it = xinterpreters.TFLMHostInterpreter()
    it.set_model(model_content=(tmp_path / "prelu.xcore.tflite").read_bytes())

    def on_xmos(sample):
        it.set_tensor(0, sample)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])

    np.testing.assert_array_equal(_outputs(on_xmos, x), want)
    it.close()
