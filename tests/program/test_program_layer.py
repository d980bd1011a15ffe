"""Layer.run: the template method checks inputs and outputs and wraps errors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.program import LayerError, LayerOutput, LinearEncoding, QTensor
from quantemu.program.layer import Layer

INT8 = LinearEncoding(scale=0.5, zero_point=0, dtype="int8")


@dataclass(frozen=True, kw_only=True)
class Scripted(Layer):
    """Returns ``codes`` with ``encoding``, or raises ``error``."""

    codes: object = None
    encoding: LinearEncoding = INT8
    error: Exception | None = None

    def compute(self, inputs):
        if self.error is not None:
            raise self.error
        return LayerOutput(QTensor(self.codes, self.encoding), {"n": 1})


def _layer(**fields) -> Scripted:
    base = {"name": "conv1", "op": "conv2d_deep", "inputs": ("x",), "output": "y"}
    return Scripted(**base, exact=True, note="", backend="xs3", **fields)


def _x() -> list[QTensor]:
    return [QTensor(np.zeros((2, 3), np.int8), INT8)]


def test_a_good_output_passes_through_with_its_counters():
    codes = np.array([[-128, 0, 127]], np.int8)
    out = _layer(codes=codes).run(_x())
    assert out.tensor.codes is codes and out.counters == {"n": 1}


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        (np.zeros((2, 3), np.int32), "codes have dtype int32, the encoding stores int8"),
        (np.zeros((2, 3), np.float32), "codes must be an integer array, got float32"),
        ([1, 2], "codes must be an integer array, got list"),
    ],
)
def test_an_output_its_encoding_cannot_hold_is_an_error_naming_the_layer(codes, message):
    with pytest.raises(LayerError) as info:
        _layer(codes=codes).run(_x())
    assert str(info.value) == f"layer 'conv1' (conv2d_deep, xs3): output 'y': {message}"


def test_per_channel_codes_need_one_channel_per_scale():
    enc = LinearEncoding(scale=np.array([0.5, 0.25]), dtype="int8", axis=1)
    with pytest.raises(LayerError, match=r"do not have 2 channels along axis 1"):
        _layer(codes=np.zeros((2, 3), np.int8), encoding=enc).run(_x())
    _layer(codes=np.zeros((2, 2), np.int8), encoding=enc).run(_x())


def test_quantemu_errors_keep_their_class_and_gain_the_location():
    error = UnsupportedError("pads (1, 2): asymmetric padding")
    with pytest.raises(UnsupportedError) as info:
        _layer(error=error).run(_x())
    assert str(info.value) == "layer 'conv1' (conv2d_deep, xs3): pads (1, 2): asymmetric padding"
    assert info.value.__cause__ is error


def test_other_exceptions_become_layer_errors_that_say_it_is_a_bug():
    with pytest.raises(LayerError, match=r"^layer 'conv1' \(conv2d_deep, xs3\): ValueError: b"):
        _layer(error=ValueError("b")).run(_x())


def test_inputs_are_counted_and_typed():
    layer = _layer(codes=np.zeros((2, 3), np.int8))
    with pytest.raises(InvalidInputError, match=r"got 2 inputs, it reads 1 \(x\)"):
        layer.run(_x() * 2)
    with pytest.raises(InvalidInputError, match="input 'x' is a ndarray, not a QTensor"):
        layer.run([np.zeros(3, np.int8)])


def test_without_a_backend_the_location_names_the_op_only():
    layer = Scripted(name="n", op="relu", inputs=(), output="y", exact=True, note="", codes=[1])
    with pytest.raises(LayerError, match=r"^layer 'n' \(relu\): output 'y'"):
        layer.run([])
