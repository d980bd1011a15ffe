"""ARCHITECTURE.md's worked example registers and runs through quantemu.compile."""

from __future__ import annotations

import example_backend
import numpy as np
import pytest

import quantemu
from quantemu.backends import registry
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError


@pytest.fixture
def toy():
    with registry.isolated():
        example_backend.register()
        yield


def test_the_example_backend_compiles_runs_and_evaluates(toy):
    graph = quantemu.load_onnx(demo_model_path())
    x, labels = demo_dataset("test")
    prog = quantemu.compile(graph, "toy", demo_dataset("calib")[0])
    ops = {layer.op for layer in prog.lowered.layers}
    assert "flatten" in ops and any(op.startswith("float:") for op in ops)
    result = prog.run(x[:8], keep="all")
    flatten = next(layer for layer in prog.lowered.layers if layer.op == "flatten")
    codes = result.tensors[flatten.output].codes
    assert codes.tolist() == result.tensors[flatten.inputs[0]].codes.reshape(8, -1).tolist()
    evaluation = prog.evaluate(x, labels)
    assert evaluation.backend == "toy" and evaluation.agreement > 0.9
    assert prog.header["exact_flatten"] == "True"


def test_options_are_typed_and_checked(toy):
    graph = quantemu.load_onnx(demo_model_path())
    calib = demo_dataset("calib")[0]
    prog = quantemu.compile(graph, "toy", calib, exact_flatten="false")
    assert "flatten" not in {layer.op for layer in prog.lowered.layers}
    with pytest.raises(InvalidInputError, match=r"toy: unknown option\(s\) 'isa'"):
        quantemu.compile(graph, "toy", calib, isa="avx2")
    assert registry.known_backends() == ["toy"]
    assert np.isfinite(prog.run(calib[:2], keep="all").outputs[graph.outputs[0]]).all()
