"""Fuzz the TFLite importer with mutated and truncated copies of the reference models.

Whatever loads is also optimized, run in float and, for a few, compiled for onednn (its own
int8 quantization): each step gives a result or a QuantemuError (fuzz_helpers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fuzz_helpers import FAST, examples, mutated, outcome
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_fuzz_onnx import _after_load

import quantemu
from quantemu.errors import InvalidInputError
from quantemu.graph.tflite_reader import read_tflite

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

DATA = Path(__file__).resolve().parents[1] / "data"
SMALL = sorted(p for p in (DATA / "tflite_refs").glob("*.int8.tflite") if p.stat().st_size < 4000)
PUBLIC = sorted((DATA / "models_xs3_public").glob("*.tflite"))
MODELS = {p.name: p.read_bytes() for p in SMALL + PUBLIC}


def _with_weight_scale(name: str, value: float) -> bytes:
    """``name`` with the first scale of its first quantized 4-D constant set to ``value``."""
    data = MODELS[name]
    tensor = next(
        t for t in read_tflite(data).tensors if t.quant and t.data is not None and t.data.ndim == 4
    )
    old = tensor.quant.scale.astype("<f4").tobytes()
    assert data.count(old) == 1
    new = np.array([value, *tensor.quant.scale[1:]], "<f4").tobytes()
    return data.replace(old, new)


# Found by this fuzzer: a NaN, infinite or huge weight scale dequantized to NaN/inf weights.
INF_SCALE = _with_weight_scale("conv_fallback.int8.tflite", float("inf"))
NAN_SCALE = _with_weight_scale("conv_fallback.int8.tflite", float("nan"))
HUGE_SCALE = _with_weight_scale("conv_fallback.int8.tflite", 1e38)


def test_models_found() -> None:
    assert len(SMALL) >= 10 and PUBLIC


@settings(**examples(400))
@example(INF_SCALE)
@example(NAN_SCALE)
@example(HUGE_SCALE)
@given(st.sampled_from(sorted(MODELS)).flatmap(lambda n: mutated(MODELS[n])))
def test_mutated_tflite_bytes(data: bytes) -> None:
    graph = outcome(quantemu.load_tflite, data)
    if graph is not None:
        _after_load(graph)


@settings(**examples(100))
@given(st.sampled_from([p.name for p in SMALL]).flatmap(lambda n: mutated(MODELS[n])))
def test_mutated_tflite_compiles(data: bytes) -> None:
    graph = outcome(quantemu.load_tflite, data)
    if graph is not None:
        _after_load(graph, compile_too=True)


@settings(**FAST)
@given(st.binary(max_size=64).map(lambda b: b[:4] + b"TFL3" + b[4:]))
def test_random_bytes_with_identifier(data: bytes) -> None:
    outcome(quantemu.load_tflite, data)


@pytest.mark.parametrize("data", [INF_SCALE, NAN_SCALE, HUGE_SCALE])
def test_bad_weight_scale_is_named(data: bytes) -> None:
    with pytest.raises(InvalidInputError, match="re-export the model"):
        quantemu.load_tflite(data)
