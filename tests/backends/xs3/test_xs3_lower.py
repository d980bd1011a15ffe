"""Whole-model lowering onto XS3: the demo end to end, cross-checks against the lib_nn operators
called directly with independently derived parameters, errors, counters and options."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model, weights

import quantemu
from quantemu.backends import xs3
from quantemu.backends.tflite.quantize import (
    activation_params,
    bias_scales,
    quantize_bias,
    quantize_weights,
)
from quantemu.backends.xs3.lower.options import Options
from quantemu.backends.xs3.lower.toolchains import lower
from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize

# These tests pin the tflite2xcore (BSO) generation; the xformer path is tested with the models.
BSO = "tflite2xcore"
RNG = np.random.default_rng(7)


def _lower(graph, ranges, **options):
    """``lower()`` with keyword options, typed as a run's plan types them."""
    return lower(graph, ranges, Options.from_mapping(options))


def _compile(proto, calib, **options):
    options = {"toolchain": BSO, **options}
    return quantemu.compile(load_onnx(proto), backend="xs3", calib=calib, progress=False, **options)


def _conv_model(c_in, c_out, k, *, group=1, stride=1, pad=None, act=None, bias=True, seed=0):
    pad = k // 2 if pad is None else pad
    w = weights((c_out, c_in // group, k, k), seed=seed)
    inits = {"w": w, **({"b": weights((c_out,), seed=seed + 1, scale=0.3)} if bias else {})}
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    out = "conv" if act else "y"
    nodes = [
        helper.make_node(
            "Conv", ins, [out], name="conv", group=group, strides=[stride, stride],
            pads=[pad] * 4, kernel_shape=[k, k],
        )
    ]  # fmt: skip
    if act:
        nodes.append(helper.make_node(act, [out], ["y"], name="act"))
    return model(nodes, {"x": ["N", c_in, 9, 9]}, ["y"], inits)


# --- (a) the demo model end to end -------------------------------------------------------------

DEMO_OPS = [
    "conv2d_shallowin",  # 3x3 stem, C_in 1 -> 4: K_w * C_in = 12 <= 32
    "conv2d_depthwise",
    "conv2d_1x1",
    "tflite:ADD",
    "maxpool2d",
    "conv2d_deep",  # 3x3, C_in 16: 48 > 32
    "avgpool2d",
    "reshape",
    "fully_connected_8",
]


def test_demo_lowers_runs_and_keeps_the_float_accuracy():
    x_cal, _ = demo_dataset("calib")
    x, y = demo_dataset("test")
    prog = quantemu.compile(
        demo_model_path(), backend="xs3", calib=x_cal, progress=False, toolchain=BSO
    )
    assert [layer.op for layer in prog.lowered.layers] == DEMO_OPS
    result = prog.run(x, keep="all")
    accuracy = float((result.outputs["logits"].argmax(axis=1) == y).mean())
    float_accuracy = float((prog.graph.run_float(x)["logits"].argmax(axis=1) == y).mean())
    # Measured: float 0.9917, xs3 0.9917 (357/360).
    assert float_accuracy == pytest.approx(0.9917, abs=1e-3)
    assert accuracy >= 0.985
    header = prog.header
    assert header["backend"] == "xs3" and header["model"] == "host_reference"
    assert "a5f0c8b" in header["library"] and "ties toward +inf" in header["rounding"]
    stem = prog.lowered.layers[0]
    assert stem.exact and "1 -> 4" in stem.note
    assert not prog.lowered.layers[3].exact and "TFLite-Micro" in prog.lowered.layers[3].note
    for name, counters in result.counters.items():
        assert all(isinstance(v, int) and v >= 0 for v in counters.values()), name
    assert result.counters["/stem/Conv"]["acc_saturated"] == 0
    # The ReLU's work (outputs below the zero point -128) is not a precision loss.
    assert result.counters["/stem/Conv"]["activation_clamped"] > 0
    assert result.counters["/stem/Conv"]["output_saturated"] == 0


def test_batch_equals_one_image_at_a_time():
    x_cal, _ = demo_dataset("calib")
    x, _ = demo_dataset("test")
    prog = quantemu.compile(
        demo_model_path(), backend="xs3", calib=x_cal[:64], progress=False, toolchain=BSO
    )
    batch = prog.run(x[:5], keep="all")
    for i in range(5):
        single = prog.run(x[i : i + 1], keep="all")
        for name, tensor in single.tensors.items():
            assert np.array_equal(tensor.codes[0], batch.tensors[name].codes[i]), name


# --- (b) cross-checks: lowered layer == lib_nn operator with independently derived parameters ---


def _derived(prog, w_float, b_float, axis=0, out="y"):
    """TFLite's weights/bias and the BSO, derived here from the program's tensor encodings."""
    enc_in = prog.lowered.input_encodings["x"]
    enc_out = (
        prog.run(np.zeros((1, *prog.graph.inputs[0].shape[1:]), np.float32), keep="all")
        .tensors[out]
        .encoding
    )
    q, s_w = quantize_weights(w_float, axis=0)
    b_scales = bias_scales(enc_in.scale, s_w)
    bias = quantize_bias(b_float, b_scales)
    return enc_in, enc_out, q, b_scales, bias


def _bso(enc_in, enc_out, b_scales, kernel, bias, *, axis=0):
    return xs3.derive_bso(
        input_scale=1.0,
        input_zero_point=enc_in.zero_point,
        weight_scales=b_scales.astype(np.float64),
        output_scale=enc_out.scale,
        output_zero_point=enc_out.zero_point,
        weights=kernel,
        bias=bias,
        channel_axis=axis,
    ).bso()


@pytest.mark.parametrize(
    ("shape", "op"),
    [
        ((16, 8, 3, 1, 1), "conv2d_deep"),
        ((8, 12, 3, 1, 2), "conv2d_shallowin"),
        ((12, 8, 1, 1, 1), "conv2d_1x1"),
        ((8, 8, 3, 8, 1), "conv2d_depthwise"),
    ],
)
def test_conv_layer_equals_the_libnn_operator(shape, op):
    c_in, c_out, k, group, stride = shape
    proto = _conv_model(c_in, c_out, k, group=group, stride=stride)
    x = RNG.normal(size=(3, c_in, 9, 9)).astype(np.float32)
    prog = _compile(proto, x)
    (layer,) = prog.lowered.layers
    assert layer.op == op and layer.exact
    result = prog.run(x, keep="all")
    w = prog.graph.initializers["w"]
    enc_in, enc_out, q, b_scales, bias = _derived(prog, w, prog.graph.initializers["b"])
    y_h = (9 + 2 * (k // 2) - k) // stride + 1
    opts = xs3.OutputOptions()
    if op == "conv2d_depthwise":
        kernel = np.ascontiguousarray(np.transpose(q[:, 0], (1, 2, 0)))
        bso = _bso(enc_in, enc_out, b_scales, kernel, bias, axis=-1)
    else:
        kernel = np.transpose(q, (0, 2, 3, 1))
        if op == "conv2d_shallowin":
            kernel = np.pad(kernel, ((0, 0), (0, 0), (0, 32 // c_in - k), (0, 0)))
        if op == "conv2d_1x1":
            kernel = kernel.reshape(c_out, c_in)
        kernel = np.ascontiguousarray(kernel)
        bso = _bso(enc_in, enc_out, b_scales, kernel, bias)
    window = xs3.Window(k, k, -(k // 2), -(k // 2), stride, stride)
    params = xs3.ConvParams(enc_in.zero_point, window, xs3.YParams(y_h, y_h, c_out), opts)
    fn = getattr(xs3, op)
    for i in range(x.shape[0]):  # one HWC image per call, as lib_nn takes it
        x_hwc = np.ascontiguousarray(result.tensors["x"].codes[i].transpose(1, 2, 0))
        direct = fn(x_hwc, kernel, bso, opts if op == "conv2d_1x1" else params)
        assert np.array_equal(result.tensors["y"].codes[i], direct.y.transpose(2, 0, 1))


def test_dense_layer_equals_fully_connected_8():
    w = weights((5, 10), seed=3)  # C_in = 10 is padded to 12
    b = weights((5,), seed=4, scale=0.2)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)
    proto = model([node], {"x": ["N", 10]}, ["y"], {"w": w, "b": b})
    x = RNG.normal(size=(6, 10)).astype(np.float32)
    prog = _compile(proto, x)
    (layer,) = prog.lowered.layers
    assert layer.op == "fully_connected_8" and "10 -> 12" in layer.note
    result = prog.run(x, keep="all")
    enc_in = prog.lowered.input_encodings["x"]
    enc_out = result.tensors["y"].encoding
    q, s_w = quantize_weights(w)
    b_scales = bias_scales(enc_in.scale, s_w)
    kernel = np.pad(q, ((0, 0), (0, 2)))
    bso = _bso(enc_in, enc_out, b_scales, kernel, quantize_bias(b, b_scales))
    for i in range(x.shape[0]):
        x_i = np.pad(result.tensors["x"].codes[i], (0, 2))
        direct = xs3.fully_connected_8(kernel, x_i, bso)
        assert np.array_equal(result.tensors["y"].codes[i], direct.y)


def test_tflite_parameters_by_hand():
    # max|w| = 1.0: scale = 1/127 in float32; 0.5 * 127 = 63.5 rounds away from zero to 64.
    q, s = quantize_weights(np.array([[0.5, -1.0, -0.5]], np.float32))
    assert q.tolist() == [[64, -127, -64]] and s[0] == np.float32(1.0) / np.float32(127)
    # [-1, 3]: scale 4/255; zp_from_min = -128 + 63.75 = -64.25 -> -64.
    scale, zp = activation_params(-1.0, 3.0)
    assert scale == np.float32(4.0) / np.float32(255.0) and zp == -64
    # bias 0.75 at bias scale 0.5: 1.5 rounds away from zero to 2 (TFLite), not to even.
    assert quantize_bias(np.float32([0.75, -0.75]), np.float32([0.5, 0.5])).tolist() == [2, -2]


def test_add_layer_equals_a_scalar_transcription_of_tflite():
    from quantemu.intmath import reference

    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    proto = model(nodes, {"a": ["N", 4, 3, 3], "b": ["N", 4, 3, 3]}, ["y"])
    a = RNG.normal(size=(2, 4, 3, 3)).astype(np.float32)
    b = (3 * RNG.normal(size=(2, 4, 3, 3))).astype(np.float32)
    graph = optimize(load_onnx(proto))
    ranges = quantemu.calibrate(graph, {"a": a, "b": b}, progress=False)
    lowered = _lower(graph, ranges, toolchain=BSO)
    (layer,) = lowered.layers
    from quantemu.simulate import run_lowered

    result = run_lowered(lowered, graph.outputs, {"a": a, "b": b})
    p = layer.params  # the tflite backend's ADD parameters, run as TFLite-Micro
    (q1, e1), (q2, e2) = (
        (p.input1_multiplier, p.input1_shift),
        (p.input2_multiplier, p.input2_shift),
    )
    qo, eo = p.output_multiplier, p.output_shift
    z1, z2 = -p.input1_offset, -p.input2_offset
    zo = int(layer.encoding.zero_point)

    def mbqm(v, q, e):
        return reference.rounding_divide_by_pot(
            reference.saturating_rounding_doubling_high_mul_round_half_up(v, q), -e
        )

    codes_a, codes_b = result.tensors["a"].codes.ravel(), result.tensors["b"].codes.ravel()
    want = []
    for ca, cb in zip(codes_a.tolist(), codes_b.tolist(), strict=True):
        s = mbqm((ca - z1) << 20, q1, e1) + mbqm((cb - z2) << 20, q2, e2)
        want.append(min(max(mbqm(s, qo, eo) + zo, -128), 127))
    assert result.tensors["y"].codes.ravel().tolist() == want
    assert not layer.exact


def test_global_average_pool_and_flatten_order_on_a_small_resnet():
    from quantemu.graph import zoo

    proto = zoo.resnet18(batch="N", size=32, width=8, num_classes=10)
    x = RNG.normal(size=(4, 3, 32, 32)).astype(np.float32)
    prog = _compile(proto, x)
    ops = {layer.op for layer in prog.lowered.layers}
    assert {"avgpool2d_global", "conv2d_shallowin", "conv2d_deep", "tflite:ADD"} <= ops
    out = prog.run(x, keep="all").outputs[prog.graph.outputs[0]]
    ref = prog.graph.run_float(x)[prog.graph.outputs[0]]
    assert np.corrcoef(out.ravel(), ref.ravel())[0, 1] > 0.95


# --- (c) errors --------------------------------------------------------------------------------


def test_unknown_and_bad_options_are_errors():
    proto = _conv_model(4, 4, 3)
    x = RNG.normal(size=(2, 4, 9, 9)).astype(np.float32)
    with pytest.raises(InvalidInputError, match=r"unknown option\(s\) 'isa'.*symmetric_saturation"):
        _compile(proto, x, isa="avx2")
    # lower() directly: quantemu.compile's first parameter is also called ``model``.
    graph = optimize(load_onnx(proto))
    ranges = quantemu.calibrate(graph, x, progress=False)
    with pytest.raises(InvalidInputError, match=r"model = 'fpga'.*'host_reference', 'device'"):
        _lower(graph, ranges, toolchain=BSO, model="fpga")
    # Text is typed by the field (LoweringOptions.from_mapping); other types by Options itself.
    with pytest.raises(InvalidInputError, match=r"symmetric_saturation = 'maybe'; use true or"):
        _compile(proto, x, symmetric_saturation="maybe")
    with pytest.raises(InvalidInputError, match=r"activation_clamp = 2; use True or False"):
        _lower(graph, ranges, toolchain=BSO, activation_clamp=2)


def test_unsupported_operators_and_attributes_are_errors():
    lrn = helper.make_node("LRN", ["x"], ["y"], name="norm", size=3)
    x = RNG.normal(size=(2, 4, 9, 9)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"LRN 'norm'.*supported operators: .*Conv"):
        _compile(model([lrn], {"x": ["N", 4, 9, 9]}, ["y"]), x)
    x8 = RNG.normal(size=(2, 8, 9, 9)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"grouped convolution \(group=2.*depthwise"):
        _compile(_conv_model(8, 8, 3, group=2), x8)
    leaky = _conv_model(4, 4, 3, act="LeakyRelu")
    with pytest.raises(UnsupportedError, match=r"fused activation 'leaky_relu'"):
        _compile(leaky, x)


def test_float_fallback_is_explicit():
    nodes = [
        helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
        helper.make_node("Softmax", ["h"], ["y"], name="softmax", axis=1),
    ]
    proto = model(nodes, {"x": ["N", 8]}, ["y"], {"w": weights((4, 8))})
    x = RNG.normal(size=(5, 8)).astype(np.float32)
    prog = _compile(proto, x)
    soft = prog.lowered.layers[1]
    assert soft.op == "float:Softmax" and not soft.exact
    assert "TFLite-Micro's int8 reference Softmax" in soft.note and "not bit-exact" in soft.note
    out = prog.run(x, keep="all")
    # TFLite fixes softmax outputs to scale 1/256, zero point -128.
    enc = out.tensors["y"].encoding
    assert (enc.scale, enc.zero_point) == (1 / 256, -128)
    ref = prog.graph.run_float(x)["y"]
    assert np.abs(out.outputs["y"] - ref).max() < 0.05


def test_standalone_sigmoid_is_the_converters_lookup_table():
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="sig")]
    proto = model(nodes, {"x": ["N", 4, 2, 2]}, ["y"])
    x = (4 * RNG.normal(size=(3, 4, 2, 2))).astype(np.float32)
    prog = _compile(proto, x)
    (layer,) = prog.lowered.layers
    assert layer.op == "lookup8" and layer.exact
    result = prog.run(x, keep="all")
    enc_in = result.tensors["x"].encoding
    codes = result.tensors["x"].codes
    real = (codes.astype(np.float32) - np.float32(enc_in.zero_point)) * np.float32(enc_in.scale)
    sig = np.float32(1) / (np.float32(1) + np.exp(-real))
    want = np.clip(np.round(sig / np.float32(1 / 256) - 128), -128, 127)
    assert np.array_equal(result.tensors["y"].codes, want.astype(np.int8))


# --- (d) counters and options ------------------------------------------------------------------


def test_inputs_beyond_the_calibrated_range_saturate_the_output():
    proto = _conv_model(16, 8, 3)
    x = RNG.normal(size=(2, 16, 9, 9)).astype(np.float32)
    prog = _compile(proto, x)
    # On the calibration data only the extremes can clip (zero-point nudging shifts the range
    # by up to half an LSB).
    assert prog.run(x, keep="all").counters["conv"]["output_saturated"] <= 2
    loud = prog.run(8 * x, keep="all").counters["conv"]
    assert loud["output_saturated"] > 100 and loud["acc_saturated"] == 0


def _fixed_ranges(graph, x, **override):
    ranges = quantemu.calibrate(graph, x, progress=False)
    tensors = dict(ranges.tensors)
    tensors.update({k: TensorRange(*v) for k, v in override.items()})
    return CalibrationRanges(tensors=tensors, observer="fixed")


def test_activation_clamp_option_and_counter():
    proto = _conv_model(8, 8, 3, act="Relu")
    graph = optimize(load_onnx(proto))
    assert graph.nodes[0].attrs["activation"] == "relu"
    x = RNG.normal(size=(2, 8, 9, 9)).astype(np.float32)
    # A ReLU output range that does not start at 0 (as a QDQ file could fix it): zp = 0.
    ranges = _fixed_ranges(graph, x, y=(-4.0, 4.0))
    from quantemu.simulate import run_lowered

    plain = run_lowered(_lower(graph, ranges, toolchain=BSO), graph.outputs, {"x": x})
    clamped = run_lowered(
        _lower(graph, ranges, toolchain=BSO, activation_clamp=True), graph.outputs, {"x": x}
    )
    zp = plain.tensors["y"].encoding.zero_point
    assert zp == -1  # -128 + round_half_away(127.5)
    moved = plain.counters["conv"]["activation_clamped"]
    assert moved == int(np.count_nonzero(plain.tensors["y"].codes < zp)) > 0
    assert clamped.counters["conv"]["activation_clamped"] == moved
    assert clamped.tensors["y"].codes.min() == zp
    assert (
        _lower(graph, ranges, toolchain=BSO, activation_clamp=True).header["activation_clamp"]
        == "True"
    )


def test_symmetric_saturation_and_device_model_options():
    from quantemu.simulate import run_lowered

    graph = optimize(load_onnx(_conv_model(16, 8, 3)))
    x = RNG.normal(size=(2, 16, 9, 9)).astype(np.float32)
    ranges = quantemu.calibrate(graph, x, progress=False)
    sym = _lower(graph, ranges, toolchain=BSO, symmetric_saturation=True, model=xs3.Model.DEVICE)
    assert sym.header["symmetric_saturation"] == "True" and sym.header["model"] == "device"
    assert sym.layers[0].params.options == xs3.OutputOptions(True, xs3.Model.DEVICE)
    low = run_lowered(sym, graph.outputs, {"x": 8 * x}).tensors["y"].codes.min()
    assert low == -127
    plain = run_lowered(_lower(graph, ranges, toolchain=BSO), graph.outputs, {"x": 8 * x})
    assert plain.tensors["y"].codes.min() == -128


def test_qdq_overrides_are_honoured():
    quantization = pytest.importorskip("onnxruntime.quantization")
    import tempfile
    from pathlib import Path

    x_cal, _ = demo_dataset("calib")
    x, y = demo_dataset("test")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": x_cal[i : i + 32]} for i in range(0, 64, 32)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "qdq.onnx"
        quantization.quantize_static(
            str(demo_model_path()), str(out), Reader(),
            quant_format=quantization.QuantFormat.QDQ, per_channel=True,
            weight_type=quantization.QuantType.QInt8,
        )  # fmt: skip
        graph = load_onnx(out)
    prog = quantemu.compile(graph, backend="xs3", calib=x_cal[:64], progress=False, toolchain=BSO)
    overrides = prog.graph.quant_overrides
    conv = next(layer for layer in prog.lowered.layers if layer.op == "conv2d_deep")
    node = prog.graph.node(conv.name)
    w_override = overrides[node.inputs[1]]
    # The file's int8 weights, laid out (C_out, K_h, K_w, C_in) for conv2d_deep.
    assert np.array_equal(conv.kernel, np.transpose(w_override.values, (0, 2, 3, 1)))
    enc = prog.run(x[:1], keep="all").tensors[conv.output].encoding
    o = overrides[conv.output]
    shift = 128 if o.dtype == "uint8" else 0  # uint8 codes are read as int8 with zp - 128
    assert enc.scale == float(o.scale) and enc.zero_point == int(o.zero_point) - shift
    # The input enters on the grid of the model's first Q/DQ pair.
    first = next(n for n in prog.graph.nodes if n.inputs[0] == "input")
    want = overrides[first.outputs[0]]
    assert prog.lowered.input_encodings["input"].scale == float(want.scale)
    accuracy = float((prog.run(x, keep="all").outputs["logits"].argmax(axis=1) == y).mean())
    assert accuracy >= 0.97


def _single(node, shape, x, **inits):
    proto = model([node], {"x": ["N", *shape]}, ["y"], inits)
    prog = _compile(proto, x)
    return prog, prog.run(x, keep="all")


def test_padded_channels_are_dropped():
    # C_in 6 -> 8, C_out 10 -> 12 (shallowin: 3 * 8 <= 32); depthwise C 6 -> 8.
    x = RNG.normal(size=(2, 6, 9, 9)).astype(np.float32)
    for proto, op in (
        (_conv_model(6, 10, 3), "conv2d_shallowin"),
        (_conv_model(6, 6, 3, group=6), "conv2d_depthwise"),
    ):
        prog = _compile(proto, x)
        (layer,) = prog.lowered.layers
        assert layer.op == op and "6 -> 8" in layer.note
        out = prog.run(x, keep="all")
        ref = prog.graph.run_float(x)["y"]
        assert out.tensors["y"].codes.shape == ref.shape
        assert np.corrcoef(out.outputs["y"].ravel(), ref.ravel())[0, 1] > 0.999


def test_pooling_variants():
    x = RNG.normal(size=(2, 4, 6, 6)).astype(np.float32)
    # Padding: TFLite's reference average pool; the corner window holds 4 image pixels.
    node = helper.make_node(
        "AveragePool", ["x"], ["y"], name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
    )
    prog, out = _single(node, [4, 6, 6], x)
    assert prog.lowered.layers[0].op == "tflite:AVERAGE_POOL_2D"
    codes = out.tensors["x"].codes.astype(np.int64)
    corner = codes[:, :, :2, :2].sum(axis=(2, 3))
    want = np.where(corner > 0, (corner + 2) // 4, -((-corner + 2) // 4))
    assert np.array_equal(out.tensors["y"].codes[:, :, 0, 0], want)
    assert out.tensors["y"].encoding is out.tensors["x"].encoding
    # 3x3 stride 3, VALID: lib_nn avgpool2d with scale 114, shift 10.
    node = helper.make_node(
        "AveragePool", ["x"], ["y"], name="pool", kernel_shape=[3, 3], strides=[3, 3]
    )
    prog, out = _single(node, [4, 6, 6], x)
    layer = prog.lowered.layers[0]
    assert (layer.op, layer.scale, layer.shift) == ("avgpool2d", 114, 10)
    s = codes[:, :, :3, :3].sum(axis=(2, 3)) * 114
    assert np.array_equal(out.tensors["y"].codes[:, :, 0, 0], (s + 512) >> 10)
    # Max pooling with padding: padding never wins.
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], pads=[1, 1, 1, 1]
    )
    prog, out = _single(node, [4, 6, 6], x)
    assert prog.lowered.layers[0].exact
    assert np.array_equal(out.tensors["y"].codes[:, :, 0, 0], codes[:, :, 0, 0])


# --- operator capabilities the lowering added: batches, chunked exact GEMM, y_raw --------------


def _rails_bso(c):
    # Biases within a few products of the int32 rails: the running sums cross them (the
    # order-faithful path runs, and the host's wrapping operators wrap).
    sign = np.where(np.arange(c) % 2 == 0, 1, -1)
    bias = sign * (2**31 - 1 - RNG.integers(0, 2000, c))
    return xs3.pack_bso(
        bias, shift1=RNG.integers(0, 12, c), scale=RNG.integers(2**14, 2**15, c),
        offset_scale=RNG.integers(-100, 100, c), offset=RNG.integers(-300, 300, c),
        shift2=RNG.integers(10, 22, c),
    )  # fmt: skip


@pytest.mark.parametrize(
    "op", ["conv2d_deep", "conv2d_shallowin", "conv2d_1x1", "conv2d_depthwise"]
)
@pytest.mark.parametrize("model_", list(xs3.Model))
def test_batched_convolutions_equal_one_call_per_image(op, model_):
    c_in, c_out, n = 8, 8, 3
    x = RNG.integers(-128, 128, (n, 6, 5, c_in), dtype=np.int8)
    opts = xs3.OutputOptions(False, model_)
    params = xs3.ConvParams(-5, xs3.Window(3, 2, -1, -1, 1, 2), xs3.YParams(6, 3, c_out), opts)
    kernels = {
        "conv2d_deep": (c_out, 3, 2, c_in),
        "conv2d_shallowin": (c_out, 3, 32 // c_in, c_in),
        "conv2d_1x1": (c_out, c_in),
        "conv2d_depthwise": (3, 2, c_in),
    }
    k = RNG.integers(-128, 128, kernels[op], dtype=np.int8)
    if op == "conv2d_shallowin":
        k[:, :, 2:, :] = 0
    bso = _rails_bso(c_out)
    fn, p = getattr(xs3, op), (opts if op == "conv2d_1x1" else params)
    batch = fn(x, k, bso, p)
    singles = [fn(x[i], k, bso, p) for i in range(n)]
    assert np.array_equal(batch.y, np.stack([s.y for s in singles]))
    assert np.array_equal(batch.acc, np.stack([s.acc for s in singles]))
    assert np.array_equal(batch.y_raw, np.stack([s.y_raw for s in singles]))
    for name in ("acc_saturated", "acc_wrapped", "output_saturated", "rounding_wrapped"):
        assert getattr(batch, name) == sum(getattr(s, name) for s in singles), name
    assert batch.acc_saturated + batch.acc_wrapped > 0  # the order-faithful path ran
    # y is y_raw clamped to the output range.
    assert np.array_equal(batch.y, np.clip(batch.y_raw, -128, 127))


def test_batched_fully_connected_equals_one_call_per_row():
    w = RNG.integers(-128, 128, (5, 40), dtype=np.int8)
    x = RNG.integers(-128, 128, (4, 40), dtype=np.int8)
    bso = _rails_bso(5)
    for model_ in xs3.Model:
        batch = xs3.fully_connected_8(w, x, bso, xs3.OutputOptions(False, model_))
        singles = [
            xs3.fully_connected_8(w, x[i], bso, xs3.OutputOptions(False, model_)) for i in range(4)
        ]
        assert np.array_equal(batch.y, np.stack([s.y for s in singles]))
        assert batch.acc_saturated == sum(s.acc_saturated for s in singles)
    with pytest.raises(
        InvalidInputError, match=r"X must have 1 dimensions.*2 with a leading batch"
    ):
        xs3.fully_connected_8(w, x[None], bso)


def test_long_dot_products_are_exact_in_float32_chunks():
    from quantemu.backends.xs3.bso.accumulation import exact_gemm

    n = 3 * 1024 + 17  # four chunks
    a = np.full((3, n), -128, np.int64)
    a[1] = 127
    a[2] = RNG.integers(-128, 128, n)
    b = np.full((n, 2), -128, np.int64)
    b[:, 1] = RNG.integers(-128, 128, n)
    got = exact_gemm(a.astype(np.float32), b.astype(np.float32))
    assert got.dtype == np.int64 and np.array_equal(got, a @ b)
    assert got[0, 0] == n * 2**14  # beyond float32's exact integers: chunking keeps it exact
