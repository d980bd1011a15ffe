"""TensorFlow's converter's rewrites (LayerNormalization, HardSigmoid) made before calibration:
the float graph they give computes what the original computes, and the tflite and xs3 backends
calibrate and lower the rewritten graph."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.tflite.lower.decompose import decompose_for_tf_converter
from quantemu.errors import InvalidInputError
from quantemu.graph import load_onnx, optimize


def _layer_norm_model(path, *, bias: bool = True, outputs: int = 1) -> str:
    rng = np.random.default_rng(3)
    gamma = (1 + 0.2 * rng.standard_normal(32)).astype(np.float32)
    beta = rng.uniform(-0.2, 0.2, 32).astype(np.float32)
    inits = [numpy_helper.from_array(gamma, "gamma")]
    inputs = ["x", "gamma"]
    if bias:
        inits.append(numpy_helper.from_array(beta, "beta"))
        inputs.append("beta")
    names = ["y", "mean", "inv_std"][:outputs]
    node = helper.make_node("LayerNormalization", inputs, names, axis=-1, epsilon=1e-5)
    graph = helper.make_graph(
        [node],
        "ln",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 32])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(path)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _hard_sigmoid_model(path) -> str:
    node = helper.make_node("HardSigmoid", ["x"], ["y"], alpha=1 / 6, beta=0.5)
    graph = helper.make_graph(
        [node],
        "hs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def _x(shape, seed=0):
    return (np.random.default_rng(seed).standard_normal((5, *shape)) * 2 + 0.5).astype(np.float32)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("outputs", [1, 3])
def test_layer_norm_written_out_computes_the_same(tmp_path, bias, outputs):
    graph = optimize(load_onnx(_layer_norm_model(tmp_path / "ln.onnx", bias=bias, outputs=outputs)))
    rewritten = decompose_for_tf_converter(graph)
    ops = [n.op_type for n in rewritten.nodes]
    assert ops == [
        "ReduceMean", "SquaredDifference", "ReduceMean", "Add", "Rsqrt",
        "Mul", "Mul", "Mul", "Sub", "Add",
    ]  # fmt: skip
    x = _x((16, 32))
    want, got = graph.run_float(x), rewritten.run_float(x)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-5)


def test_hard_sigmoid_written_out_computes_the_same(tmp_path):
    graph = optimize(load_onnx(_hard_sigmoid_model(tmp_path / "hs.onnx")))
    rewritten = decompose_for_tf_converter(graph)
    assert [n.op_type for n in rewritten.nodes] == ["Mul", "Add", "Min", "Relu"]
    x = _x((8, 4, 4)) * 3
    np.testing.assert_allclose(
        rewritten.run_float(x)["y"], graph.run_float(x)["y"], rtol=1e-6, atol=1e-6
    )


def test_other_backends_keep_the_graph(tmp_path):
    graph = optimize(load_onnx(_layer_norm_model(tmp_path / "ln.onnx")))
    for backend in ("onednn", "nvdla", "nnie"):
        assert [n.op_type for n in quantemu.prepare(graph, backend).nodes] == ["LayerNormalization"]
    assert [n.op_type for n in quantemu.prepare(graph, "xs3", toolchain="tflite2xcore").nodes] == [
        "LayerNormalization"
    ]
    assert len(quantemu.prepare(graph, "xs3").nodes) == 10


@pytest.mark.parametrize("backend", ["tflite", "xs3"])
def test_layer_norm_runs_on_tflite_targets(tmp_path, backend):
    path = _layer_norm_model(tmp_path / "ln.onnx")
    program = quantemu.compile(path, backend, calib=_x((16, 32), seed=1))
    result = program.run(_x((16, 32), seed=2), keep="all")
    y = result.tensors["y"]
    assert y.codes.dtype == np.int8
    # Every intermediate is a calibrated int8 tensor: the rewrite happened before calibration.
    outputs = {out for n in program.graph.nodes for out in n.outputs}
    assert len(outputs) == 10
    assert outputs <= set(program.ranges.tensors)
    assert all(result.tensors[name].codes.dtype == np.int8 for name in outputs)
    err = y.dequantize() - program.graph.run_float(_x((16, 32), seed=2))["y"]
    # int8 intermediates (the variance, its rsqrt) cost a few output steps, no more.
    assert float(np.abs(err).max()) < 6 * float(y.encoding.scale)


def test_precomputed_ranges_of_the_float_graph_are_refused_clearly(tmp_path):
    path = _layer_norm_model(tmp_path / "ln.onnx")
    graph = optimize(load_onnx(path))
    ranges = quantemu.calibrate(graph, _x((16, 32)))
    with pytest.raises(InvalidInputError, match=r"quantemu.prepare\(graph, 'tflite'\)"):
        quantemu.compile(graph, "tflite", calibration=ranges)
    prepared = quantemu.prepare(graph, "tflite")
    quantemu.compile(graph, "tflite", calibration=quantemu.calibrate(prepared, _x((16, 32))))
