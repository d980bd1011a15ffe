"""Run a single int8 model's samples on each live peer: LiteRT's reference kernels
(BUILTIN_REF), TFLite-Micro, and XMOS's host interpreter after xcore-opt. Each runner skips the
calling test when its peer is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest


def on_litert(blob: bytes, x: np.ndarray) -> np.ndarray:
    """The outputs of each sample of ``x`` on LiteRT's BUILTIN_REF kernels, stacked."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(
        model_content=blob, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    (src,), (dst,) = it.get_input_details(), it.get_output_details()

    def one(sample):
        it.set_tensor(src["index"], sample)
        it.invoke()
        return it.get_tensor(dst["index"])

    return np.stack([one(sample) for sample in x])


def on_tflite_micro(blob: bytes, x: np.ndarray) -> np.ndarray:
    """The outputs of each sample of ``x`` on TFLite-Micro, stacked."""
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)

    def one(sample):
        it.set_input(sample, 0)
        it.invoke()
        return it.get_output(0)

    return np.stack([one(sample) for sample in x])


def on_xmos(blob: bytes, x: np.ndarray, tmp: Path) -> np.ndarray:
    """The outputs of each sample of ``x`` on XMOS's host interpreter, the model compiled by
    xcore-opt first (in ``tmp``), stacked."""
    xformer = pytest.importorskip("xmos_ai_tools.xformer")
    xinterpreters = pytest.importorskip("xmos_ai_tools.xinterpreters")
    # xcore-opt runs its tools from the interpreter's bin directory
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    (tmp / "model.tflite").write_bytes(blob)
    xformer.convert(str(tmp / "model.tflite"), str(tmp / "model.xcore.tflite"), {})
    it = xinterpreters.TFLMHostInterpreter()
    it.set_model(model_content=(tmp / "model.xcore.tflite").read_bytes())

    def one(sample):
        it.set_tensor(0, sample)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])

    outputs = np.stack([one(sample) for sample in x])
    it.close()
    return outputs
