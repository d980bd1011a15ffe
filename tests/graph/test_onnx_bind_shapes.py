"""Input shapes bound before the import folds (``load_onnx(shapes=)``, ``--input-shape``): a
model with symbolic spatial sizes imports once they are given, and its errors say how."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import model, run_ort, weights

from quantemu.cli import main
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_model, load_onnx


def _symbolic_model() -> onnx.ModelProto:
    """MaxPool auto_pad SAME, and a Reshape target from the Shape of a (N, C, H, W) tensor."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "MaxPool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"
        ),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "two"], ["nc"]),
        helper.make_node("Concat", ["nc", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["y"]),
    ]
    inits = {
        "w": weights((4, 3, 3, 3)),
        "zero": np.array([0], np.int64),
        "two": np.array([2], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    return model(nodes, {"x": ("N", 3, "H", "W")}, ["y"], inits, opset=11)


def test_symbolic_sizes_are_refused_with_the_remedy():
    with pytest.raises(UnsupportedError, match=r"auto_pad SAME.*--input-shape INPUT=.*shapes="):
        load_onnx(_symbolic_model())


@pytest.mark.parametrize("given", [(1, 3, 9, 7), ("N", 3, 9, 7), (None, 3, 9, 7)])
def test_bound_shapes_import_and_match_onnxruntime(given):
    graph = load_onnx(_symbolic_model(), shapes={"x": given})
    x = np.random.default_rng(0).normal(size=(1, 3, 9, 7)).astype(np.float32)
    (want,) = run_ort(_symbolic_model(), {"x": x})
    got = graph.run_float({"x": x})["y"]
    assert got.shape == want.shape == (1, 4, 20)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_load_model_binds_too_and_names_a_wrong_input():
    assert load_model(_symbolic_model(), shapes={"x": (2, 3, 8, 8)}).inputs[0].shape == (
        2, 3, 8, 8)  # fmt: skip
    with pytest.raises(InvalidInputError, match="no graph input named 'z'; inputs: x"):
        load_onnx(_symbolic_model(), shapes={"z": (1, 3, 8, 8)})
    with pytest.raises(InvalidInputError, match="rank 4"):
        load_onnx(_symbolic_model(), shapes={"x": (1, 3, 8)})


def test_the_command_line_binds_before_import(tmp_path, capsys):
    onnx.save(_symbolic_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((2, 3, 9, 7), np.float32))
    code = main(["run", str(tmp_path / "m.onnx"), "--backend", "onednn", "-q", "--no-layers",
                 "--calib", str(tmp_path / "c.npy"), "--input-shape", "x=Nx3x9x7"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
