"""int8 GELU (LiteRT's Prepare-time table): == LiteRT 2.3.0 on all 256 codes of the recorded
quantizations (gelu_peer_vectors.json, made by tools/make_gelu_vectors.py), == the scalar twin
(hypothesis), and through the ``tflite`` backend's ``Gelu`` rule; TFLite-Micro has no GELU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

import quantemu
from quantemu.backends.tflite import activation_reference as R
from quantemu.backends.tflite.gelu import gelu_int8, gelu_params
from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.backends.tflite.strategies import codes, scales, zero_points

VECTORS = json.loads((Path(__file__).parent / "gelu_peer_vectors.json").read_text())
CODES = np.arange(-128, 128, dtype=np.int8)
APPROX = {False: "none", True: "tanh"}


def _hex(h: str) -> list[int]:
    return np.frombuffer(bytes.fromhex(h), dtype=np.int8).tolist()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"{c['approximate']}-{c['s_in']}")
def test_equals_litert_on_every_code(case):
    quant = (case["s_in"], case["zp_in"], case["s_out"], case["zp_out"])
    approximate = APPROX[case["approximate"]]
    expected = _hex(case["litert_ref_hex"])
    assert case["litert_builtin_same"]  # LiteRT's default resolver runs the same table
    y, _ = gelu_int8(CODES, gelu_params(*quant, approximate=approximate))
    assert y.tolist() == expected
    assert [R.gelu(int(c), *quant, approximate=approximate) for c in CODES] == expected


@given(
    st.tuples(scales(2.0**-10, 2.0**-1), zero_points, scales(2.0**-10, 2.0**-1), zero_points),
    st.sampled_from(list(APPROX.values())),
    codes((3, 17)),
)
def test_kernel_equals_scalar_twin(quant, approximate, x):
    p = gelu_params(*quant, approximate=approximate)
    y, counters = gelu_int8(x, p)
    assert y.dtype == np.int8 and y.shape == x.shape
    assert y.ravel().tolist() == [
        R.gelu(int(c), *quant, approximate=approximate) for c in x.ravel()
    ]
    assert counters["output_saturated"] == sum(p.clamped[int(c) + 128] for c in x.ravel())


def test_refusals():
    with pytest.raises(InvalidInputError, match="approximate = 'erf'"):
        gelu_params(0.05, 0, 0.05, 0, approximate="erf")
    with pytest.raises(InvalidInputError, match="s_out"):
        gelu_params(0.05, 0, 0.0, 0)
    with pytest.raises(InvalidInputError, match="int8"):
        gelu_int8(np.array([0.5]), gelu_params(0.05, 0, 0.05, 0))
    with pytest.raises(UnsupportedError, match="TFLite-Micro"):
        gelu_params(0.05, 0, 0.05, 0, runtime=TfliteRuntime.TFLITE_MICRO)
    # The recorded peers: the installed TFLite-Micro registers no GELU kernel.
    assert (
        "Didn't find op for builtin opcode 'GELU'"
        in VECTORS["peers_on_gelu"]["tflite_micro"]["messages"]
    )


def _gelu_model(approximate: str):
    graph = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)],
        "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


CALIB = np.random.default_rng(1).uniform(-4, 3, (16, 64)).astype(np.float32)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_backend_rule_runs_the_table(approximate):
    program = quantemu.compile(_gelu_model(approximate), "tflite", calib=CALIB)
    (layer,) = program.lowered.layers
    assert layer.op == "GELU"
    result = program.run(CALIB[:3], keep="all")
    x, y = result.tensors["x"], result.tensors["y"]
    e_in, e_out = x.encoding, y.encoding
    p = gelu_params(
        e_in.scale, e_in.zero_point, e_out.scale, e_out.zero_point, approximate=approximate
    )
    assert layer.params == p
    expected = [
        R.gelu(
            int(c),
            e_in.scale,
            e_in.zero_point,
            e_out.scale,
            e_out.zero_point,
            approximate=approximate,
        )
        for c in x.codes.ravel()
    ]
    assert y.codes.ravel().tolist() == expected


def test_backend_tflite_micro_refuses_naming_gelu():
    with pytest.raises(UnsupportedError, match=r"'Gelu'.*TFLite-Micro registers no GELU"):
        quantemu.compile(_gelu_model("none"), "tflite", calib=CALIB, runtime="tflite_micro")
