"""NNIE lowering: the demo end to end, cross-checks against the backend operators, errors,
counters, options and the LSB index of :class:`LogEncoding`."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import quantemu
from quantemu.backends.nnie import log_dequantize, log_quantize, snap_clip
from quantemu.backends.nnie.lower import (
    CodeLayer,
    LogEncoding,
    NnieLayer,
    Options,
    lint_graph,
    lower,
    quantize_counted,
)
from quantemu.calibration.api import calibrate
from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize, zoo
from quantemu.graph.ir import Attrs
from quantemu.graph.ops.conv import conv2d
from quantemu.program import run_lowered
from tests.graph.onnx_models import model, weights

DEMO_FLOAT_ACCURACY = 0.9917  # the float model on the test split (360 images)
DEMO_NNIE_FLOOR = 0.98  # measured 0.9917 (357/360, same as float) with the default options


def _lower(graph, ranges, **options):
    """``lower()`` with keyword options, typed as a run's plan types them."""
    return lower(graph, ranges, Options.from_mapping(options))


def _ranges(**tensors: tuple[float, float]) -> CalibrationRanges:
    return CalibrationRanges({k: TensorRange(*v) for k, v in tensors.items()}, observer="test")


def _clip(max_abs: float) -> float:
    """MQBench's clip: max|x|, snapped to the table value 2^(round(16*log2 max|x|)/16)."""
    return snap_clip(max_abs).snapped


# -- (a) the demo model end to end -------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    graph = optimize(load_onnx(demo_model_path()))
    x_calib, _ = demo_dataset("calib")
    ranges = calibrate(graph, x_calib, progress=False)
    return graph, ranges


def test_demo_lowers_and_keeps_float_accuracy(demo):
    graph, ranges = demo
    lowered = lower(graph, ranges)
    x, labels = demo_dataset("test")
    result = run_lowered(lowered, graph.outputs, {"input": x})
    float_acc = float(np.mean(graph.run_float(x)["logits"].argmax(1) == labels))
    nnie_acc = float(np.mean(result.outputs["logits"].argmax(1) == labels))
    assert float_acc == pytest.approx(DEMO_FLOAT_ACCURACY, abs=1e-4)
    assert nnie_acc >= DEMO_NNIE_FLOOR
    ops = [layer.op for layer in lowered.layers]
    assert ops == [
        "nnie:Conv",
        "float:Conv",  # depthwise: MQBench's NNIE flow exports no clip for grouped Conv
        "nnie:Conv",
        "nnie:Add",
        "nnie:MaxPool",
        "nnie:Conv",
        "nnie:AveragePool",
        "codes:Flatten",
        "nnie:Gemm",
    ]
    assert [layer.exact for layer in lowered.layers] == [
        False, False, False, False, True, False, False, True, False,
    ]  # fmt: skip
    for name, tensor in result.tensors.items():
        assert tensor.codes.dtype == np.uint8, name
        assert isinstance(tensor.encoding, LogEncoding), name
    assert set(result.counters["/stem/Conv"]) == {"clipped", "underflow_to_zero"}


def test_demo_header_and_lint(demo):
    graph, ranges = demo
    lowered = lower(graph, ranges)
    header = lowered.header
    assert header["backend"] == "nnie"
    for key in ("rounding", "semantics", "clip_table", "accumulation", "grouped_conv", "lint"):
        assert header[key]
    assert header["lint"] == "3 findings (0 error, 3 warning, 0 info)"
    assert [f.rule for f in lowered.findings] == [
        "depthwise_conv",
        "pool_ceil_mode",
        "pool_ceil_mode",
    ]
    assert lowered.findings == tuple(lint_graph(graph))


def test_demo_clips_follow_max_abs_of_the_calibrated_ranges(demo):
    graph, ranges = demo
    lowered = lower(graph, ranges)
    # The input range is [0, 1]: max|x| = 1 = 2^(0/16), k = 0.
    assert lowered.input_encodings["input"] == LogEncoding(1.0)
    for layer in lowered.layers:
        if isinstance(layer, NnieLayer):
            low, high = ranges[layer.output]
            assert layer.encoding.clip == _clip(max(abs(low), abs(high)))
            for w in layer.weights:
                values = graph.initializers[w.name]
                assert w.encoding.clip == _clip(float(np.max(np.abs(values))))


def test_batch_is_vectorized_and_images_are_independent(demo):
    graph, ranges = demo
    lowered = lower(graph, ranges)
    x, _ = demo_dataset("test")
    batch = run_lowered(lowered, graph.outputs, {"input": x[:5]})
    for i in (0, 4):
        one = run_lowered(lowered, graph.outputs, {"input": x[i : i + 1]})
        assert np.array_equal(one.tensors["logits"].codes[0], batch.tensors["logits"].codes[i])


def test_compile_runs_the_nnie_lowering():
    x_calib, _ = demo_dataset("calib")
    program = quantemu.compile(demo_model_path(), backend="nnie", calib=x_calib[:64])
    x, _ = demo_dataset("test")
    out = program.run(x[:8])
    assert out.tensors["logits"].codes.dtype == np.uint8
    assert program.lowered.header["backend"] == "nnie"


def test_resnet18_shape_lowers_runs_and_is_linted():
    floor = optimize(load_onnx(zoo.resnet18(batch="N", size=64, width=16, num_classes=10)))
    x = np.random.default_rng(0).normal(size=(2, 3, 64, 64)).astype(np.float32)
    # The stem's 3x3/2 max pool with pads 1 and floor mode: NNIE's ceil mode gives 17, not 16.
    # As the model states it, NNIE's toolchain computes another network: refused with the lint.
    with pytest.raises(UnsupportedError, match=r"floor gives \[16, 16\], NNIE's ceil gives"):
        lower(floor, calibrate(floor, x, progress=False))
    graph = quantemu.prepare(floor, "nnie")  # as NNIE computes it: the pool in ceil mode
    lowered = lower(graph, calibrate(graph, x, progress=False))
    result = run_lowered(lowered, graph.outputs, {graph.inputs[0].name: x})
    ops = {layer.op for layer in lowered.layers}
    assert ops == {
        "nnie:Conv",
        "nnie:MaxPool",
        "nnie:Add",
        "float:GlobalAveragePool",
        "codes:Flatten",
        "nnie:Gemm",
    }
    reference = graph.run_float(x)[graph.outputs[0]]
    simulated = result.outputs[graph.outputs[0]]
    cosine = np.sum(reference * simulated) / np.linalg.norm(reference) / np.linalg.norm(simulated)
    assert cosine > 0.9
    assert not [f for f in lowered.findings if f.severity.value == "error"]
    assert "maxpool: 16x16 -> 17x17" in lowered.header["pooling"]


# -- (b) cross-check: lowered single layers == the backend operators called directly ------------


def _single_layer(node, inputs, outputs, inits, calib):
    graph = optimize(load_onnx(model([node], inputs, outputs, inits)))
    return graph, calibrate(graph, calib, progress=False)


def test_conv_layer_equals_the_backend_operators_called_directly():
    rng = np.random.default_rng(3)
    w, b = weights((4, 3, 3, 3), seed=4), rng.normal(0, 0.1, 4).astype(np.float32)
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1], strides=[2, 1]
    )
    x_calib = rng.normal(size=(8, 3, 9, 7)).astype(np.float32)
    graph, ranges = _single_layer(node, {"x": ["N", 3, 9, 7]}, ["y"], {"w": w, "b": b}, x_calib)
    x = (rng.normal(size=(5, 3, 9, 7)) * 1.2).astype(np.float32)  # some values beyond calib
    result = run_lowered(lower(graph, ranges), graph.outputs, {"x": x})

    # The parameters derived by hand with MQBench's rule (max|.|, snapped to the table).
    c_x, c_w = _clip(float(np.abs(x_calib).max())), _clip(float(np.abs(w).max()))
    attrs = Attrs({"group": 1, "pads": (1, 1, 1, 1), "strides": (2, 1), "dilations": (1, 1)})
    c_y = _clip(float(np.abs(conv2d(x_calib, w, b, attrs)).max()))
    x_codes, x_levels = log_quantize(x, c_x)
    w_codes, w_levels = log_quantize(w, c_w)
    y = conv2d(x_levels, w_levels, b, attrs)
    y_codes, _ = log_quantize(y, c_y)

    layer = lower(graph, ranges).layers[0]
    assert layer.weights[0].encoding.clip == c_w
    assert np.array_equal(layer.weights[0].codes, w_codes)
    assert np.array_equal(result.tensors["x"].codes, x_codes)
    assert np.array_equal(result.tensors["y"].codes, y_codes)
    assert result.tensors["y"].encoding == LogEncoding(c_y)


def test_gemm_layer_equals_the_backend_operators_called_directly():
    rng = np.random.default_rng(5)
    w, b = weights((6, 10), seed=6), rng.normal(0, 0.1, 6).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)
    x_calib = rng.normal(size=(16, 10)).astype(np.float32)
    graph, ranges = _single_layer(node, {"x": ["N", 10]}, ["y"], {"w": w, "b": b}, x_calib)
    x = rng.normal(size=(7, 10)).astype(np.float32)
    result = run_lowered(lower(graph, ranges), graph.outputs, {"x": x})

    c_x, c_w = _clip(float(np.abs(x_calib).max())), _clip(float(np.abs(w).max()))
    c_y = _clip(float(np.abs(x_calib @ w.T + b).max()))
    x_levels = log_dequantize(log_quantize(x, c_x)[0], c_x)
    w_levels = log_dequantize(log_quantize(w, c_w)[0], c_w)
    y_codes, _ = log_quantize(x_levels @ w_levels.T + b, c_y)
    assert np.array_equal(result.tensors["y"].codes, y_codes)


def test_gemm_by_hand():
    # x = [1, 0.5] with clip 1 (k = 0): codes 0x7F (2^0) and 0x6F (2^(-16/16)), exact levels.
    # w = [[1, 1]] with clip 1: 0x7F. y = 1.5; the output clip max|y| = 1.5 gives
    # k = round(16*log2 1.5) = round(9.36) = 9, and 1.5 itself rounds to index 127:
    # code 0x7F, value 2^(9/16) = 1.4768... (not saturated: 9.36 < k + 0.5).
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)
    graph = optimize(
        load_onnx(model([node], {"x": ["N", 2]}, ["y"], {"w": np.ones((1, 2), np.float32)}))
    )
    lowered = lower(graph, _ranges(x=(0.0, 1.0), y=(0.0, 1.5)))
    result = run_lowered(lowered, graph.outputs, {"x": np.array([[1.0, 0.5]], np.float32)})
    assert result.tensors["x"].codes.tolist() == [[0x7F, 0x6F]]
    assert result.tensors["y"].codes.tolist() == [[0x7F]]
    assert result.outputs["y"][0, 0] == np.float32(2 ** (9 / 16))
    assert result.counters["fc"] == {"clipped": 0, "underflow_to_zero": 0}


# -- (c) errors ----------------------------------------------------------------------------------


def _div_graph():
    node = helper.make_node("Div", ["x", "x"], ["y"], name="divide")
    return optimize(load_onnx(model([node], {"x": ["N", 4]}, ["y"])))


def test_unsupported_operator_names_node_op_and_supported_set():
    with pytest.raises(UnsupportedError, match=r"Div 'divide'.*supported operators: Add, "):
        lower(_div_graph(), _ranges(x=(-1.0, 1.0), y=(0.0, 1.0)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"isa": "avx2"}, r"unknown option\(s\) 'isa'.*grouped_conv \(float\|log\)"),
        ({"grouped_conv": "int8"}, r"grouped_conv = 'int8'; choose one of 'float', 'log'"),
        ({"layer_inputs": 2}, r"layer_inputs = 2; choose one of 'per_tensor', 'shared'"),
        ({"clip_selection": "mse"}, r"one of 'max_abs'; 'mse' needs the calibration tensors"),
    ],
)
def test_bad_options(demo, options, message):
    graph, ranges = demo
    with pytest.raises(InvalidInputError, match=message):
        _lower(graph, ranges, **options)


def test_options_built_directly_take_values_and_say_why_not_mse(demo):
    assert Options(grouped_conv="log").grouped_conv.value == "log"
    with pytest.raises(InvalidInputError, match=r"choose one of 'max_abs'; 'mse' needs the"):
        Options(clip_selection="mse")
    graph, ranges = demo
    with pytest.raises(InvalidInputError, match="typed options"):
        lower(graph, ranges, {"grouped_conv": "log"})


def test_missing_range_and_bad_arguments(demo):
    graph, ranges = demo
    partial = CalibrationRanges(
        {k: v for k, v in ranges.items() if k != "logits"}, observer="minmax"
    )
    with pytest.raises(InvalidInputError, match="no calibrated range for tensor 'logits'"):
        lower(graph, partial)
    with pytest.raises(InvalidInputError, match="takes a quantemu Graph"):
        lower("model.onnx", ranges)
    with pytest.raises(InvalidInputError, match="ranges must map tensor names"):
        lower(graph, [1, 2])
    bad = dict(ranges.items(), input=TensorRange(0.0, float("inf")))
    with pytest.raises(InvalidInputError, match="range of tensor 'input' is not finite"):
        lower(graph, bad)


def _qdq_graph():
    scale, zero = np.array(0.05, np.float32), np.array(0, np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xdq"], name="dq"),
        helper.make_node("Gemm", ["xdq", "w"], ["y"], name="fc", transB=1),
    ]
    inits = {"s": scale, "z": zero, "w": weights((3, 4), seed=2)}
    return optimize(load_onnx(model(nodes, {"x": ["N", 4]}, ["y"], inits)))


def test_qdq_overrides_are_an_error_unless_ranges_are_requested():
    graph = _qdq_graph()
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    ranges = calibrate(graph, x, progress=False)
    with pytest.raises(UnsupportedError, match=r"'xdq' has a QDQ .*quant_overrides='range'"):
        lower(graph, ranges)
    lowered = _lower(graph, ranges, quant_overrides="range")
    gemm = next(layer for layer in lowered.layers if layer.name == "fc")
    # int8 zero point 0, scale 0.05: the override reaches 0.05 * 128 = 6.4 -> clip 2^(43/16).
    assert gemm.input_encodings[0] == LogEncoding(_clip(6.4))
    assert lowered.header["quant_overrides"] == "range"


# -- (d) counters ---------------------------------------------------------------------------------


def test_saturation_and_underflow_counters():
    # Identity Gemm (w = eye: clip 1, every weight the exact level 1) with input clip 8.
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)
    w = np.eye(4, dtype=np.float32)
    graph = optimize(load_onnx(model([node], {"x": ["N", 4]}, ["y"], {"w": w})))
    # Output clip 1: the top level's rounding bound is 2^(1/32) = 1.0219. 3.0 and -1.03 (input
    # level -2^(1/16) = -1.044) saturate; 1.02 (input level 1.0) does not.
    small = lower(graph, _ranges(x=(-8.0, 8.0), y=(-1.0, 1.0)))
    x = np.array([[3.0, -1.03, 1.02, 0.0]], np.float32)
    result = run_lowered(small, graph.outputs, {"x": x})
    assert result.counters["fc"] == {"clipped": 2, "underflow_to_zero": 0}
    assert result.tensors["y"].codes.tolist() == [[0x7F, 0xFF, 0x7F, 0x80]]
    # Output clip 100: k = round(16*log2 100) = 106, z = -21, P = 2^(-37/16) = 0.20 and
    # N = 2^(-36/16) = 0.21: +-0.1 underflow to 0x80; 0.5 = 2^(-16/16) is index -16 + 21 = 5.
    large = lower(graph, _ranges(x=(-8.0, 8.0), y=(-100.0, 100.0)))
    x = np.array([[0.1, -0.1, 0.5, 0.0]], np.float32)
    result = run_lowered(large, graph.outputs, {"x": x})
    assert result.counters["fc"] == {"clipped": 0, "underflow_to_zero": 2}
    assert result.tensors["y"].codes.tolist() == [[0x80, 0x80, 0x05, 0x80]]


def test_relu_on_codes_and_shared_layer_inputs():
    # Unoptimized Conv -> Relu -> Add(relu, conv): Relu runs on codes and keeps the encoding.
    w = weights((2, 2, 1, 1), seed=7)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["y"], name="add"),
    ]
    graph = load_onnx(model(nodes, {"x": ["N", 2, 3, 3]}, ["y"], {"w": w}))
    x = np.random.default_rng(1).normal(size=(4, 2, 3, 3)).astype(np.float32)
    ranges = calibrate(graph, x, progress=False)
    lowered = lower(graph, ranges)
    relu = lowered.layers[1]
    assert isinstance(relu, CodeLayer) and relu.exact
    result = run_lowered(lowered, graph.outputs, {"x": x})
    c = result.tensors["c"]
    assert result.tensors["r"].encoding == c.encoding
    assert np.array_equal(result.tensors["r"].codes, np.where(c.codes > 0x80, 0x80, c.codes))
    assert result.counters["relu"]["negatives_zeroed"] == np.count_nonzero(c.codes > 0x80)
    # Per tensor (default), the Add reads r at its own clip, smaller than c's for this data
    # (max r < max|c|): r is re-quantized on entry.
    assert lowered.layers[2].input_encodings[0].k < c.encoding.k
    assert "reads 'r' (stored at clip" in lowered.layers[2].note
    assert result.counters["add"]["inputs_requantized"] == x.size
    shared = _lower(graph, ranges, layer_inputs="shared")
    add = shared.layers[2]
    assert add.input_encodings[0] == add.input_encodings[1] == c.encoding
    out = run_lowered(shared, graph.outputs, {"x": x})
    assert "inputs_requantized" not in out.counters["add"]  # r already carries c's clip


def test_grouped_conv_option(demo):
    graph, ranges = demo
    lowered = _lower(graph, ranges, grouped_conv="log")
    depthwise = lowered.layers[1]
    assert depthwise.op == "nnie:Conv" and depthwise.weights
    assert lowered.header["grouped_conv"] == "log"
    assert Options.from_mapping().grouped_conv.value == "float"


# -- LogEncoding -----------------------------------------------------------------------------------


def test_lsb_index_numbers_the_representable_values_consecutively():
    encoding = LogEncoding(3.7)
    codes = np.arange(256, dtype=np.uint8)
    codes = codes[codes != 0x80]  # -0 ...
    codes = np.append(codes, np.uint8(0x80))  # ... appears once
    values = encoding.dequantize(codes).astype(np.float64)
    order = np.argsort(values, kind="stable")
    index = encoding.lsb_index(codes[order])
    assert index.tolist() == list(range(-127, 129))
    assert np.all(np.diff(values[order]) > 0)
    # quantize(dequantize(codes)) is the identity: levels are exact.
    assert np.array_equal(encoding.quantize(encoding.dequantize(codes)), codes)


def test_quantize_counted_matches_a_direct_count():
    rng = np.random.default_rng(9)
    x = (rng.standard_cauchy(50_000) * 0.3).astype(np.float32)
    x[:100] = 0.0
    encoding = LogEncoding(2.0)
    codes, clipped, underflow = quantize_counted(x, encoding)
    k = encoding.k
    unclamped = np.rint(16 * np.log2(np.abs(x[x != 0]).astype(np.float64)))
    assert clipped == np.count_nonzero(unclamped > k)
    assert underflow == np.count_nonzero((codes == 0x80) & (x != 0))
    assert np.array_equal(codes, log_quantize(x, 2.0)[0])
