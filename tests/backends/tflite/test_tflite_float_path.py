"""quantemu's float path reproduces TensorFlow 2.17's converter on the reference models.

For every model of ``tests/data/tflite_refs`` with a float export (``NAME.float.onnx``, tf2onnx
from the same Keras model, and ``NAME.calib.npy``, the representative dataset the converter
saw; ``tools/tflite_refs_float.py``), ``quantemu.compile(onnx, "tflite", calib=...)`` must
derive the int8 file's integers: per layer (layout Transposes left out) the operator, weight
codes and scales, int32 biases, constant operands and output zero points are equal, and the
program's output codes on ``x_int8`` equal ``y_tflite_ref``.

Activation scales are equal except where the calibrated range itself differs: TFLite calibrates
with its float kernels, quantemu with its float executor, and a convolution's float32 sums in
another order can end a few ULP apart (conv_scale_spread's output: max 2.9261243 in TFLite,
2.9261248 here, 2 ULP apart; its scale 1 ULP). Those scales are listed in CALIBRATION_ULPS and
may differ by that many float32 ULPs; their zero points and everything else must be equal.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import quantemu

REFS = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
MANIFEST = json.loads((REFS / "MANIFEST.json").read_text())["models"]
FLOAT_MODELS = sorted(k for k, v in MANIFEST.items() if "float_onnx" in v)
MOVES = ("TRANSPOSE", "RESHAPE", "IDENTITY")
# (model, layer index without moves) -> float32 ULPs the calibrated scale may be off.
# hard_sigmoid: the converter folds 0.2 x + 0.5 into the conv, whose output then takes MINIMUM's
# range (same scale); the folded sums' float32 rounding puts its minimum 1 ULP apart.
# layer_norm, encoder_relu: LiteRT's float MEAN, RSQRT and MUL round differently from quantemu's
# float executor, and each scale downstream inherits the last-bit difference of the range.
CALIBRATION_ULPS = {
    ("conv_scale_spread", 0): 1,
    ("hard_sigmoid", 0): 1,
    ("hard_sigmoid", 1): 1,
    **{("layer_norm", i): 1 for i in (2, 3, 7, 8)},
    **{("encoder_relu", i): 1 for i in (4, 5, 6, 9, 10, 11, 12)},
}


def _layers(prog):
    return [layer for layer in prog.lowered.layers if getattr(layer, "op", None) not in MOVES]


def _ulps(a: float, b: float) -> int:
    ia, ib = (int(np.float32(v).view(np.int32)) for v in (a, b))
    return abs(ia - ib)


def _programs(name: str):
    calib = np.load(REFS / f"{name}.calib.npy")
    entry = MANIFEST[name]
    assert hashlib.sha256(calib.tobytes()).hexdigest() == entry["calib"]["sha256"]
    onnx_path = REFS / f"{name}.float.onnx"
    assert hashlib.sha256(onnx_path.read_bytes()).hexdigest() == entry["float_onnx"]["sha256"]
    float_prog = quantemu.compile(str(onnx_path), "tflite", calib=calib)
    int8_prog = quantemu.compile(str(REFS / f"{name}.int8.tflite"), "tflite")
    return float_prog, int8_prog


def _same_array(a, b) -> bool:
    if a is None and b is None:
        return True
    a = np.zeros_like(b) if a is None else np.asarray(a)  # tf2onnx drops an all-zero bias
    b = np.zeros_like(a) if b is None else np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b)


def _check_layer(name: str, i: int, got, want) -> None:
    where = f"{name} layer {i} ({want.op})"
    assert got.op == want.op, where
    for field in ("weights", "bias"):
        assert _same_array(getattr(got, field, None), getattr(want, field, None)), (where, field)
    constants = (getattr(got, "constants", None) or (), getattr(want, "constants", None) or ())
    assert len(constants[0]) == len(constants[1]), where
    for a, b in zip(*constants, strict=True):
        # a scalar constant may be kept 0-D or broadcast-shaped for the NCHW layout
        assert _same_array(np.squeeze(a), np.squeeze(b)), (where, "constant operand")
    e_got, e_want = got.encoding, want.encoding
    assert int(e_got.zero_point) == int(e_want.zero_point), where
    allowed = CALIBRATION_ULPS.get((name, i), 0)
    assert _ulps(e_got.scale, e_want.scale) <= allowed, (where, e_got.scale, e_want.scale)
    fed = CALIBRATION_ULPS.get((name, i - 1), 0)  # its input's scale may be off as much
    if allowed == fed == 0 and got.op != "CONCATENATION":  # see test_float_path_derives_...
        assert repr(got.params) == repr(want.params), where


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_float_path_derives_the_int8_file(name: str) -> None:
    float_prog, int8_prog = _programs(name)
    (e_float,) = float_prog.lowered.input_encodings.values()
    (e_int8,) = int8_prog.lowered.input_encodings.values()
    assert (e_float.scale, e_float.zero_point) == (e_int8.scale, e_int8.zero_point)
    got, want = _layers(float_prog), _layers(int8_prog)
    # The converter inserts a QUANTIZE before a CONCATENATION input on a fixed scale (TANH);
    # quantemu's CONCATENATION requantizes that input itself (the same reference Requantize).
    want = [layer for layer in want if layer.op != "QUANTIZE"]
    assert [layer.op for layer in got] == [layer.op for layer in want]
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        _check_layer(name, i, a, b)


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_float_path_output_codes(name: str) -> None:
    float_prog, _ = _programs(name)
    ref = np.load(REFS / f"{name}.npz")
    inp = MANIFEST[name]["input"]
    x = ref["x_int8"].astype(np.float32) - np.float32(inp["zero_point"])
    res = float_prog.run((x * np.float32(inp["scale"])).astype(np.float32))
    out = float_prog.graph.outputs[0]
    codes = np.asarray(res.tensors[getattr(out, "name", out)].codes)
    assert np.array_equal(codes.reshape(ref["y_tflite_ref"].shape), ref["y_tflite_ref"])
