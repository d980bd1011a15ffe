"""Symbolic input dimensions: bound from the --calib data or by --input-shape."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantemu.cli import main
from quantemu.cli.argtypes import input_shape
from quantemu.errors import InvalidInputError
from quantemu.graph import load_onnx


def _dynamic_model(path):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32) / 27, "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "dyn", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("backend", ["xs3", "tflite", "nvdla", "onednn"])
def test_symbolic_dims_are_bound_from_the_data(tmp_path, capsys, backend):
    _dynamic_model(tmp_path / "m.onnx")
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((4, 3, 12, 10), np.float32))
    code = main(["run", str(tmp_path / "m.onnx"), "--backend", backend, "-q", "--no-layers",
                 "--calib", str(tmp_path / "c.npy")])  # fmt: skip
    assert code == 0, capsys.readouterr().err


def test_input_shape_option_and_its_errors(tmp_path, capsys):
    _dynamic_model(tmp_path / "m.onnx")
    graph = load_onnx(tmp_path / "m.onnx")
    bound = graph.with_input_shapes({"x": (None, 3, 8, 8)})
    assert bound.inputs[0].shape == ("N", 3, 8, 8)
    with pytest.raises(InvalidInputError, match="no graph input named 'z'"):
        graph.with_input_shapes({"z": (1, 3, 8, 8)})
    with pytest.raises(InvalidInputError, match="fixed shape"):
        bound.with_input_shapes({"x": (None, 4, 8, 8)})
    assert input_shape("x=Nx3x8x8") == ("x", (None, 3, 8, 8))
    np.save(tmp_path / "c.npy", np.zeros((2, 3, 8, 8), np.float32))
    code = main(["run", str(tmp_path / "m.onnx"), "--backend", "xs3", "-q", "--no-layers",
                 "--calib", str(tmp_path / "c.npy"), "--input-shape", "x=Nx3x9x9"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "3x8x8" in err  # the data do not fit the bound shape
    with pytest.raises(SystemExit):
        main(["run", "m.onnx", "--backend", "xs3", "--input-shape", "x=0x3"])
