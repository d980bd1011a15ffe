"""The token-shaped (transformer) models of tests/data/tflite_refs (tools/tflite_refs_tokens.py)
hold the operators they were made for: the converter's LayerNormalization decomposition,
attention's batch matmuls and hard_sigmoid's MINIMUM. Their outputs and intermediates are
checked by the parametrized tests of test_tflite_refs.py like every other reference model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
MODELS = json.loads((DATA / "MANIFEST.json").read_text())["models"]

LAYER_NORM = [
    "MEAN",
    "SQUARED_DIFFERENCE",
    "MEAN",
    "ADD",
    "RSQRT",
    "MUL",
    "MUL",
    "MUL",
    "SUB",
    "ADD",
]
WANTED = {
    "layer_norm": {"SQUARED_DIFFERENCE", "RSQRT"},
    "attention": {"BATCH_MATMUL", "SOFTMAX", "FULLY_CONNECTED"},
    "attention_heads": {"BATCH_MATMUL", "TRANSPOSE", "RESHAPE"},
    "hard_sigmoid": {"MINIMUM", "RELU"},
    "encoder_relu": {"SQUARED_DIFFERENCE", "RSQRT", "FULLY_CONNECTED", "ADD"},
}


@pytest.mark.parametrize("name", sorted(WANTED))
def test_the_model_holds_its_operators(name):
    entry = MODELS[name]
    blob = (DATA / f"{name}.int8.tflite").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == entry["sha256"]["int8.tflite"]
    assert WANTED[name] <= set(entry["int8_ops"]), WANTED[name] - set(entry["int8_ops"])


@pytest.mark.parametrize("name", ["layer_norm", "encoder_relu"])
def test_layer_norm_is_the_converters_decomposition(name):
    assert MODELS[name]["int8_ops"][: len(LAYER_NORM)] == LAYER_NORM
