"""QDQ import: Q/DQ pairs removed, scales and zero points kept exactly as overrides."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_models import ORT_REASON, model, run_ort

from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx, optimize

X = [1, 2, 6, 6]
S_X = np.array(0.0123, dtype=np.float32)
Z_X = np.array(131, dtype=np.uint8)
S_W = np.array([0.011, 0.0203, 0.0077], dtype=np.float32)  # per output channel (axis 0)
Z_W = np.zeros(3, dtype=np.int8)
W_Q = np.random.default_rng(0).integers(-127, 128, (3, 2, 3, 3)).astype(np.int8)
B_Q = np.array([1200, -350, 77], dtype=np.int32)
S_B = (S_X * S_W).astype(np.float32)
S_Y = np.array(0.05, dtype=np.float32)
Z_Y = np.array(-3, dtype=np.int8)


def _qdq_model(opset: int = 13) -> onnx.ModelProto:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["x_q"], name="q_x"),
        helper.make_node("DequantizeLinear", ["x_q", "s_x", "z_x"], ["x_dq"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "s_w", "z_w"], ["w"], name="dq_w", axis=0),
        helper.make_node("DequantizeLinear", ["b_q", "s_b"], ["b"], name="dq_b", axis=0),
        helper.make_node("Conv", ["x_dq", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["conv", "s_y", "z_y"], ["conv_q"], name="q_y"),
        helper.make_node("DequantizeLinear", ["conv_q", "s_y", "z_y"], ["conv_dq"], name="dq_y"),
        helper.make_node("Relu", ["conv_dq"], ["y"], name="relu"),
    ]
    inits = {
        "s_x": S_X,
        "z_x": Z_X,
        "w_q": W_Q,
        "s_w": S_W,
        "z_w": Z_W,
        "b_q": B_Q,
        "s_b": S_B,
        "s_y": S_Y,
        "z_y": Z_Y,
    }
    return model(nodes, {"x": X}, ["y"], inits, opset)


@pytest.mark.parametrize("opset", [13, 19, 21])
def test_overrides_keep_the_files_scales_and_zero_points_exactly(opset):
    graph = load_onnx(_qdq_model(opset))
    assert [n.op_type for n in graph.nodes] == ["Clip", "Conv", "Clip", "Relu"]
    assert graph.nodes[1].inputs == ("x_dq", "w", "b")
    o = graph.quant_overrides
    assert set(o) == {"x_dq", "w", "b", "conv_dq"}
    for name, scale, zero, axis in (
        ("x_dq", S_X, Z_X, None),
        ("w", S_W, Z_W, 0),
        ("b", S_B, np.zeros(3, np.int32), 0),
        ("conv_dq", S_Y, Z_Y, None),
    ):
        assert o[name].scale.dtype == scale.dtype and o[name].scale.shape == scale.shape
        assert o[name].scale.tobytes() == scale.tobytes()  # bit for bit
        assert o[name].zero_point.dtype == zero.dtype
        assert np.array_equal(o[name].zero_point, zero)
        assert o[name].axis == axis
    assert o["w"].dtype == "int8" and o["x_dq"].dtype == "uint8"
    assert np.array_equal(o["w"].values, W_Q) and np.array_equal(o["b"].values, B_Q)
    assert o["x_dq"].values is None and o["w"].source == "dq_w" and o["x_dq"].source == "q_x"


def test_pairs_become_their_saturation_clamp():
    graph = load_onnx(_qdq_model())
    clamp = graph.node("q_x/saturate").attrs
    # uint8, zero point 131: the representable range is (0 - 131) * s .. (255 - 131) * s.
    assert clamp["min"] == float(np.float32(-131) * S_X)
    assert clamp["max"] == float(np.float32(124) * S_X)
    clamp = graph.node("q_y/saturate").attrs
    assert clamp["min"] == float(np.float32(-125) * S_Y)  # int8, zero point -3
    assert clamp["max"] == float(np.float32(130) * S_Y)


def test_dequantized_initializers_are_float32_as_onnxruntime_computes_them():
    graph = load_onnx(_qdq_model())
    expected = (W_Q.astype(np.float32) * S_W.reshape(3, 1, 1, 1)).astype(np.float32)
    assert graph.initializers["w"].dtype == np.float32
    assert graph.initializers["w"].tobytes() == expected.tobytes()
    ort = pytest.importorskip("onnxruntime", reason=ORT_REASON)
    only_dq = model(
        [helper.make_node("DequantizeLinear", ["w_q", "s_w", "z_w"], ["w"], axis=0)],
        {},
        ["w"],
        {"w_q": W_Q, "s_w": S_W, "z_w": Z_W},
    )
    (theirs,) = ort.InferenceSession(
        only_dq.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, {})
    assert theirs.tobytes() == graph.initializers["w"].tobytes()


def test_float_graph_saturates_but_does_not_round():
    graph = load_onnx(_qdq_model())
    optimized = optimize(graph)
    # The input clamp stays; the conv output clamp becomes the conv's activation; the Relu
    # reads a tensor with an override, so it is not fused away.
    assert [n.op_type for n in optimized.nodes] == ["Clip", "Conv", "Relu"]
    assert optimized.nodes[1].attrs["activation"] == "clip"
    x = np.random.default_rng(2).normal(size=X).astype(np.float32) * 3
    low, high = (graph.node("q_x/saturate").attrs[k] for k in ("min", "max"))
    low_y, high_y = (graph.node("q_y/saturate").attrs[k] for k in ("min", "max"))
    plain = model(
        [
            helper.make_node("Clip", ["x", "lo", "hi"], ["xc"]),
            helper.make_node("Conv", ["xc", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
            helper.make_node("Clip", ["conv", "lo_y", "hi_y"], ["cc"]),
            helper.make_node("Relu", ["cc"], ["y"]),
        ],
        {"x": X},
        ["y"],
        {
            "w": graph.initializers["w"],
            "b": graph.initializers["b"],
            "lo": np.array(low, np.float32),
            "hi": np.array(high, np.float32),
            "lo_y": np.array(low_y, np.float32),
            "hi_y": np.array(high_y, np.float32),
        },
    )
    pytest.importorskip("onnxruntime", reason=ORT_REASON)
    (expected,) = run_ort(plain, {"x": x})
    for g in (graph, optimized):
        np.testing.assert_allclose(g.run_float(x)["y"], expected, rtol=1e-5, atol=1e-5)


def test_dq_output_that_is_a_graph_output_keeps_its_name():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    m = model(nodes, {"x": X}, ["y"], {"s": S_Y, "z": Z_Y})
    graph = load_onnx(m)
    assert graph.outputs == ("y",) and set(graph.quant_overrides) == {"y"}
    assert [n.op_type for n in graph.nodes] == ["Relu", "Clip"]
    x = np.full(X, 100.0, np.float32)
    assert np.array_equal(graph.run_float(x)["y"], np.full(X, np.float32(130) * S_Y))


def test_per_axis_activation_pair_has_no_clamp():
    s = np.array([0.1, 0.2], np.float32)
    z = np.array([0, 3], np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["xd"], axis=1),
        helper.make_node("Relu", ["xd"], ["y"]),
    ]
    graph = load_onnx(model(nodes, {"x": X}, ["y"], {"s": s, "z": z}))
    assert [n.op_type for n in graph.nodes] == ["Relu"] and graph.nodes[0].inputs == ("x",)
    assert graph.quant_overrides["x"].axis == 1


def test_onnxruntime_quantize_static_model():
    """A real QDQ model from onnxruntime's quantization tool, per-channel weights."""
    ort = pytest.importorskip("onnxruntime", reason=ORT_REASON)
    quantization = pytest.importorskip("onnxruntime.quantization")
    from quantemu.data import demo_dataset, demo_model_path

    x, _ = demo_dataset("calib")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": x[i : i + 16]} for i in range(0, 64, 16)])

        def get_next(self):
            return next(self.batches, None)

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "qdq.onnx"
        quantization.quantize_static(
            str(demo_model_path()),
            str(out),
            Reader(),
            quant_format=quantization.QuantFormat.QDQ,
            per_channel=True,
            weight_type=quantization.QuantType.QInt8,
        )
        proto = onnx.load(out)
        graph = load_onnx(out)
    assert not {"QuantizeLinear", "DequantizeLinear"} & {n.op_type for n in graph.nodes}
    saturations = [n for n in graph.nodes if n.name.endswith("/saturate")]
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    checked = 0
    for node in proto.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        source = node.input[0]
        name = node.output[0] if source in inits else _first_dq_output(proto, source)
        override = graph.quant_overrides[name]
        scale = inits[node.input[1]]
        assert override.scale.dtype == scale.dtype and override.scale.tobytes() == scale.tobytes()
        assert np.array_equal(override.zero_point, inits[node.input[2]])
        assert override.zero_point.dtype == inits[node.input[2]].dtype
        checked += 1
    assert checked >= 10
    assert any(o.per_axis for o in graph.quant_overrides.values())
    # onnxruntime's tool drops the ReLUs (the uint8 ranges start at 0); the clamps restore them,
    # so the float graph (dequantized weights, no rounding) still classifies the digits.
    assert len(saturations) >= 8
    test_x, test_y = demo_dataset("test")
    float_graph = optimize(graph)
    accuracy = (float_graph.run_float(test_x)["logits"].argmax(axis=1) == test_y).mean()
    assert accuracy > 0.97
    del ort


def _first_dq_output(proto: onnx.ModelProto, quantized: str) -> str:
    users = [
        n for n in proto.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == quantized
    ]
    return users[0].output[0]


def test_q_feeding_a_non_dq_is_unsupported():
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("Relu", ["q"], ["y"], name="r"),
    ]
    with pytest.raises(
        UnsupportedError,
        match=r"QuantizeLinear 'q': its quantized output 'q' is "
        r"used by Relu 'r'",
    ):
        load_onnx(model(nodes, {"x": X}, ["y"], {"s": S_Y, "z": Z_Y}))


def test_mismatched_pair_is_unsupported():
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s2", "z"], ["y"], name="dq"),
    ]
    inits = {"s": S_Y, "s2": np.array(0.5, np.float32), "z": Z_Y}
    with pytest.raises(
        UnsupportedError,
        match="DequantizeLinear 'dq': its scale/zero point/axis "
        "differ from those of QuantizeLinear 'q'",
    ):
        load_onnx(model(nodes, {"x": X}, ["y"], inits))


def test_blocked_quantization_is_unsupported():
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "s"], ["w"], name="dq", axis=1, block_size=2),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    inits = {"w_q": np.ones((4, 4), np.int8), "s": np.ones((4, 2), np.float32)}
    with pytest.raises(UnsupportedError, match="blocked quantization"):
        load_onnx(model(nodes, {"x": [2, 4]}, ["y"], inits, opset=21))


def test_one_element_scale_beside_a_scalar_zero_point_is_per_tensor():
    """onnxruntime's quantize_static writes a bias's per-tensor scale as shape (1,) beside a
    scalar zero point: one value each, per tensor, dequantized as onnxruntime does."""
    b_q = np.array([-300, 7, 12000], np.int32)
    inits = {"b_q": b_q, "s_b": np.array([0.0123], np.float32), "z_b": np.array(0, np.int32)}
    dq = model(
        [helper.make_node("DequantizeLinear", ["b_q", "s_b", "z_b"], ["b"])], {}, ["b"], inits
    )
    graph = load_onnx(dq)
    override = graph.quant_overrides["b"]
    assert (
        override.axis is None
        and override.scale.shape == (1,)
        and np.array_equal(override.values, b_q)
    )
    ort = pytest.importorskip("onnxruntime", reason=ORT_REASON)
    session = ort.InferenceSession(dq.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {})[0].tobytes() == graph.initializers["b"].tobytes()
