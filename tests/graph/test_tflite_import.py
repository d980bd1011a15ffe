"""The TFLite importer on the public int8 reference models (tests/data/models_xs3_public)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_model
from quantemu.graph.tflite_import import load_tflite
from quantemu.graph.tflite_ops import same_padding
from quantemu.graph.tflite_reader import read_tflite

DATA = Path(__file__).resolve().parents[1] / "data" / "models_xs3_public"
MODELS = ("conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv")


@pytest.mark.parametrize("name", MODELS)
def test_float_meaning_matches_keras(name):
    """The dequantized graph computes what the float Keras model did, to quantization error."""
    graph = load_tflite(DATA / f"{name}.int8.tflite")
    data = np.load(DATA / f"{name}.npz")
    ov = graph.quant_overrides[graph.inputs[0].name]
    x = (data["x_int8"].astype(np.float64) - int(ov.zero_point)) * float(ov.scale)
    y = graph.run_float(x.astype(np.float32))[graph.outputs[0]]
    assert y.shape == data["y_float"].shape
    out = graph.quant_overrides[graph.outputs[0]]
    # A few output LSBs: the int8 model's accumulated rounding, not a layout mistake.
    assert np.abs(y - data["y_float"]).max() < 8 * float(out.scale)


@pytest.mark.parametrize("name", MODELS)
def test_quantization_kept_exactly(name):
    model = read_tflite(DATA / f"{name}.int8.tflite")
    graph = load_tflite(DATA / f"{name}.int8.tflite")
    for node in graph.nodes:
        if node.op_type not in ("Conv", "Gemm"):
            continue
        ov = graph.quant_overrides[node.inputs[1]]
        source = next(t for t in model.tensors if t.data is not None and t.name == node.inputs[1])
        assert ov.values.dtype == np.int8 and source.quant is not None
        assert np.array_equal(ov.scale.reshape(-1), source.quant.scale)
        stored = source.data
        if node.op_type == "Conv":
            stored = (
                stored.transpose(3, 0, 1, 2)
                if node.attrs["group"] > 1
                else stored.transpose(0, 3, 1, 2)
            )
        assert np.array_equal(ov.values, stored)
        if len(node.inputs) > 2:
            assert graph.quant_overrides[node.inputs[2]].values.dtype == np.int32
    for name_ in (*graph.input_names, *(o for n in graph.nodes for o in n.outputs)):
        assert name_ in graph.quant_overrides, name_


def test_layout_and_names():
    graph = load_tflite(DATA / "conv_relu_stack.int8.tflite")
    assert graph.inputs[0].shape == ("batch", 28, 28, 8)
    assert graph.outputs == ("StatefulPartitionedCall:0",)
    assert graph.tensors[graph.outputs[0]].shape == ("batch", 24, 24, 8)
    ops = [n.op_type for n in graph.nodes]
    assert ops == ["Transpose", "Conv", "Conv", "Conv", "Conv", "Transpose"]
    assert graph.nodes[1].attrs["tflite_op"] == "CONV_2D"
    # mlp reshapes its NHWC input directly: no transpose at all.
    assert "Transpose" not in [n.op_type for n in load_tflite(DATA / "mlp.int8.tflite").nodes]


def test_compiled_model_keeps_custom_ops():
    graph = load_model(DATA / "rgb_conv.xcore.tflite")
    codes = [n.attrs["custom_code"] for n in graph.nodes if n.op_type == "TfliteCustom"]
    assert codes[:3] == ["XC_pad_3_to_4", "XC_pad", "XC_conv2d_v2"]
    with pytest.raises(UnsupportedError, match="no float reference"):
        graph.run_float(np.zeros((1, 48, 48, 3), np.float32))


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "dilation", "expected"),
    [(28, 3, 1, 1, (1, 1)), (28, 3, 2, 1, (0, 1)), (29, 3, 2, 1, (1, 1)), (10, 3, 1, 2, (2, 2))],
)
def test_same_padding_puts_the_odd_pixel_after(size, kernel, stride, dilation, expected):
    assert same_padding(size, kernel, stride, dilation) == expected


def test_not_a_tflite_file(tmp_path):
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(InvalidInputError, match="not a TFLite flatbuffer"):
        load_tflite(bad)


@pytest.mark.parametrize("keep", [16, 200, 2000])
def test_truncated_file(tmp_path, keep):
    data = (DATA / "mlp.int8.tflite").read_bytes()
    with pytest.raises(InvalidInputError, match=r"malformed or truncated|beyond the end|holds"):
        load_tflite(data[:keep])


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_tflite(tmp_path / "nope.tflite")


def test_inspect_shows_tflite_ops_and_quantization(capsys):
    from quantemu.cli import main

    assert main(["inspect", str(DATA / "depthwise_sep.int8.tflite")]) == 0
    out = capsys.readouterr().out
    assert "DEPTHWISE_CONV_2D" in out and "quantization from the model (tflite)" in out
    assert "(axis 0) z=0 int8" in out and "z=0 int32" in out


def _with_opcode(data: bytes, code: int) -> bytes:
    """The model with its first operator code changed to builtin ``code`` (both fields)."""
    import struct

    import tflite

    buf = bytearray(data)
    tab = tflite.Model.GetRootAsModel(buf, 0).OperatorCodes(0)._tab
    deprecated, builtin = tab.Offset(4), tab.Offset(10)
    if deprecated:
        buf[tab.Pos + deprecated] = min(code, 127)
    if builtin:
        struct.pack_into("<i", buf, tab.Pos + builtin, code)
    return bytes(buf)


def test_unsupported_operator_is_named_with_its_position():
    data = (DATA / "mlp.int8.tflite").read_bytes()
    first = read_tflite(data).operators[0]
    with pytest.raises(UnsupportedError, match=r"operator 0 \(LSH_PROJECTION\).*supported TFLite"):
        load_tflite(_with_opcode(data, 15))
    assert first.name == "RESHAPE"
