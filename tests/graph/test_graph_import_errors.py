"""Malformed, truncated and unsupported models give clear errors (messages checked)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_models import model, single, weights

from quantemu.data import demo_model_path
from quantemu.errors import InvalidInputError, QuantemuError, UnsupportedError
from quantemu.graph import MAX_OPSET, load_onnx

X = (1, 3, 8, 8)


def test_random_bytes():
    data = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(InvalidInputError, match="not a valid ONNX model"):
        load_onnx(data)


def test_empty_and_text_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(InvalidInputError, match=r"empty\.onnx is not a valid ONNX model.*no graph"):
        load_onnx(empty)
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    with pytest.raises(InvalidInputError, match="not a valid ONNX model"):
        load_onnx(text)


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInputError, match=r"cannot read ONNX model .*nope\.onnx"):
        load_onnx(tmp_path / "nope.onnx")


def test_wrong_argument_type():
    with pytest.raises(InvalidInputError, match=r"expects a path, bytes or an onnx\.ModelProto"):
        load_onnx(42)


@pytest.mark.parametrize("fraction", [0.1, 0.35, 0.5, 0.8, 0.97, 0.999])
def test_truncated_file_is_a_clear_error(fraction):
    data = demo_model_path().read_bytes()
    with pytest.raises(InvalidInputError) as info:
        load_onnx(data[: int(len(data) * fraction)])
    message = str(info.value)
    assert any(
        w in message
        for w in ("truncated", "dangling", "not produced", "cannot be decoded", "holds")
    ), message


def test_dangling_input_names_node_and_tensor():
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")]
    with pytest.raises(InvalidInputError, match=r"Add 'adder': input 'ghost' .*dangling"):
        load_onnx(model(nodes, {"x": X}, ["y"]))


def test_missing_output():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    with pytest.raises(InvalidInputError, match="graph output 'z' is not produced"):
        load_onnx(model(nodes, {"x": X}, ["z"]))


def test_cycle():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Relu", ["a"], ["b"], name="n2"),
    ]
    with pytest.raises(InvalidInputError, match="cycle"):
        load_onnx(model(nodes, {"x": X}, ["a"]))


def test_conv_weight_of_the_wrong_shape():
    m, _ = single("Conv", [X, weights((4, 2, 3, 3))])
    with pytest.raises(InvalidInputError, match=r"Conv 'conv_node': input channels vs weight"):
        load_onnx(m)


def test_bias_of_the_wrong_shape():
    m, _ = single("Conv", [X, weights((4, 3, 3, 3)), weights((5,))])
    with pytest.raises(InvalidInputError, match=r"bias 'in2' has shape \(5,\), expected \(4,\)"):
        load_onnx(m)


def test_initializer_with_too_little_data():
    m, _ = single("Conv", [X, weights((4, 3, 3, 3))])
    w = m.graph.initializer[0]
    w.raw_data = w.raw_data[:40]
    with pytest.raises(InvalidInputError, match="initializer 'in1'"):
        load_onnx(m)


def test_gemm_inner_dimension_mismatch():
    m, _ = single("Gemm", [(2, 5), weights((6, 4))])
    with pytest.raises(InvalidInputError, match="Gemm 'gemm_node': inner dimensions"):
        load_onnx(m)


def test_unsupported_operator_lists_the_supported_set():
    m, _ = single("Tile", [X, np.array([1, 1, 2, 2], dtype=np.int64)])
    with pytest.raises(UnsupportedError) as info:
        load_onnx(m)
    message = str(info.value)
    assert "Tile 'tile_node'" in message and "operator 'Tile' is not supported" in message
    assert "supported operators: Add, AveragePool" in message and "Conv" in message


def test_unsupported_attribute_lists_the_known_ones():
    m, _ = single("Conv", [X, weights((4, 3, 3, 3))], frobnicate=1)
    with pytest.raises(
        UnsupportedError,
        match=r"Conv 'conv_node': attribute 'frobnicate' is not "
        r"supported for Conv; supported attributes: auto_pad, dilations, group",
    ):
        load_onnx(m)


def test_resize_cubic_is_rejected_naming_nearest_and_linear():
    m, _ = single("Resize", [X, "", np.array([1, 1, 2, 2], np.float32)], mode="cubic")
    with pytest.raises(
        UnsupportedError, match=r"mode 'cubic' is not supported.*'nearest'.*'linear'"
    ):
        load_onnx(m)


def test_resize_tf_crop_and_resize_is_rejected():
    m, _ = single(
        "Resize",
        [X, np.zeros(8, np.float32), np.array([1, 1, 2, 2], np.float32)],
        mode="nearest",
        coordinate_transformation_mode="tf_crop_and_resize",
    )
    with pytest.raises(UnsupportedError, match="tf_crop_and_resize"):
        load_onnx(m)


def test_opset_out_of_range():
    opset = MAX_OPSET + 1  # newer than the installed onnx package defines
    m, _ = single("Relu", [X], opset=opset)
    with pytest.raises(UnsupportedError, match=f"opset {opset} is not supported.*1 to {MAX_OPSET}"):
        load_onnx(m)


def test_non_float_input():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedError, match="graph input 'x' has element type INT64"):
        load_onnx(m)


def test_conv_3d_is_unsupported():
    """1-D convolutions import as 2-D ones (test_onnx_1d.py); volumetric ones do not."""
    m, _ = single("Conv", [(1, 3, 6, 6, 6), weights((4, 3, 3, 3, 3))])
    with pytest.raises(UnsupportedError, match="only 2-D Conv on NCHW input"):
        load_onnx(m)


def test_custom_domain():
    node = helper.make_node("FusedConv", ["x"], ["y"], domain="com.microsoft", name="fc")
    m = model([node], {"x": X}, ["y"])
    with pytest.raises(UnsupportedError, match=r"FusedConv 'fc': operator domain 'com\.microsoft'"):
        load_onnx(m)


def test_runtime_clip_bound():
    m, _ = single("Clip", [X, (1,)], opset=13)
    with pytest.raises(UnsupportedError, match=r"input 1 \(min, 'in1'\) is computed at run time"):
        load_onnx(m)


def test_training_mode_batchnorm():
    c = np.ones(3, np.float32)
    m, _ = single("BatchNormalization", [X, c, c, c, c], opset=15, training_mode=1)
    with pytest.raises(UnsupportedError, match="training_mode=1 is not supported"):
        load_onnx(m)


def test_maxpool_indices_output_used():
    m, _ = single("MaxPool", [X], outputs=2, kernel_shape=[2, 2])
    with pytest.raises(UnsupportedError, match=r"output 'out1' \(Indices\) is used"):
        load_onnx(m)


def test_errors_are_quantemu_errors_with_location(tmp_path):
    path = tmp_path / "bad.onnx"
    m, _ = single("Tile", [X, np.array([1, 1, 2, 2], dtype=np.int64)])
    onnx.save(m, path)
    with pytest.raises(QuantemuError, match=r"bad\.onnx: Tile 'tile_node'"):
        load_onnx(path)


class TestExecutorInputs:
    graph = load_onnx(single("Relu", [("batch", 3, 4, 4)])[0])

    def test_wrong_shape(self):
        with pytest.raises(
            InvalidInputError,
            match=r"input 'in0' has shape 2x3x5x4, the model "
            r"expects batchx3x4x4",
        ):
            self.graph.run_float(np.zeros((2, 3, 5, 4), np.float32))

    def test_integer_data(self):
        with pytest.raises(InvalidInputError, match="must be a float array, got dtype uint8"):
            self.graph.run_float(np.zeros((2, 3, 4, 4), np.uint8))

    def test_wrong_number_and_names(self):
        with pytest.raises(InvalidInputError, match="takes 1 inputs"):
            self.graph.run_float([np.zeros((1, 3, 4, 4), np.float32)] * 2)
        with pytest.raises(InvalidInputError, match=r"missing \['in0'\], unknown \['x'\]"):
            self.graph.run_float({"x": np.zeros((1, 3, 4, 4), np.float32)})

    def test_any_batch_runs(self):
        for batch in (1, 7):
            out = self.graph.run_float(np.ones((batch, 3, 4, 4), np.float64))
            assert out["out0"].shape == (batch, 3, 4, 4) and out["out0"].dtype == np.float32
