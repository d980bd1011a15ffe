"""Whole-model lowering onto NVDLA: the demo end to end, cross-checks against the nvdla ops
called directly with independently derived parameters, the other graph ops, errors, counters,
QDQ overrides and options."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model

import quantemu
from quantemu.backends.nvdla import CaccRegisters, SdpRegisters, cacc, pdp, sdp
from quantemu.backends.nvdla.lower import Options, lower, plane_factors
from quantemu.backends.nvdla.quantize import (
    output_converter_fields,
    program_pdp,
    quantize_bias_int16,
    quantize_weights,
    split_scales,
)
from quantemu.backends.nvdla.registers import PoolingMethod
from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18


def _compile(proto, calib, **options):
    return quantemu.compile(load_onnx(proto), backend="nvdla", calib=calib, progress=False,
                            **options)  # fmt: skip


def _scale(values) -> float:
    """The compiler's activation scale: float32(max|x|) / 127 in float32."""
    return float(np.float32(np.float32(np.abs(values).max()) / np.float32(127)))


def _single(op, x_shape, inits=None, outputs=("y",), **attrs):
    inputs = ["x", *(inits or {})]
    node = helper.make_node(op, inputs, list(outputs), name=op.lower(), **attrs)
    return model([node], {"x": x_shape}, list(outputs), inits or {})


def _dequant_error_lsb(prog, x, name):
    """Max |backend - float| in output LSBs for tensor ``name``, the float model fed the
    dequantized input codes (so the input's own quantization error is not counted)."""
    r = prog.run(x, keep="all")
    got = r.tensors[name]
    x_seen = r.tensors[prog.graph.inputs[0].name].dequantize()
    want = prog.graph.run_float(x_seen, intermediates=True)[name]
    return float(np.max(np.abs(got.dequantize() - want)) / got.encoding.scale)


# --- (a) the demo model ---------------------------------------------------------------------


def test_demo_model_accuracy_close_to_float():
    xc, _ = demo_dataset("calib")
    xt, yt = demo_dataset("test")
    prog = quantemu.compile(demo_model_path(), backend="nvdla", calib=xc, progress=False)
    result = prog.run(xt, keep="all")
    acc = float((result.outputs["logits"].argmax(1) == yt).mean())
    # measured 0.9917 (per_kernel, = float 0.9917); a floor a little below
    assert acc >= 0.985
    assert all(layer.exact for layer in prog.lowered.layers)
    ops = [layer.op for layer in prog.lowered.layers]
    assert ops == ["cacc+sdp", "cacc+sdp", "cacc+sdp", "sdp_ew_sum", "pdp_max", "cacc+sdp",
                   "pdp_average", "layout_flatten", "cacc+sdp(fc)"]  # fmt: skip
    assert set(result.counters["/stem/Conv"]) == {
        "acc_saturated", "output_saturated", "output_clamped"
    }  # fmt: skip
    assert prog.lowered.header["option.weights"] == "per_kernel"
    assert "half away from zero" in prog.lowered.header["rounding"]


def test_demo_per_filter_and_batch_invariance():
    xc, _ = demo_dataset("calib")
    xt, yt = demo_dataset("test")
    prog = quantemu.compile(demo_model_path(), backend="nvdla", calib=xc, progress=False,
                            weights="per_filter")  # fmt: skip
    whole = prog.run(xt[:24], keep="all")
    assert float((prog.run(xt, keep="all").outputs["logits"].argmax(1) == yt).mean()) >= 0.985
    for i in (0, 7, 23):  # one image at a time gives the same integers as the batch
        one = prog.run(xt[i : i + 1], keep="all")
        for name, t in one.tensors.items():
            assert np.array_equal(t.codes[0], whole.tensors[name].codes[i]), name
    # per-channel weight scales: the rescale moved to the BS MUL operand
    stem = prog.lowered.layers[0].stages[0]
    assert "BS_MUL" in stem.channel_operands and stem.regs.CVT_SCALE == 1


# --- (b) cross-checks: one conv layer, one dense layer --------------------------------------


def _weights_per_channel(w, per_filter):
    if not per_filter:
        q, s = quantize_weights(w)
        return q, np.full(w.shape[0], s, np.float32)
    pairs = [quantize_weights(w[k]) for k in range(w.shape[0])]  # the rule, channel by channel
    return np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs], np.float32)


def _rescale_fields(s_in, s_w, s_out, per_filter):
    if not per_filter:
        return output_converter_fields(s_in, float(s_w[0]), s_out), {}
    factors = [float(np.float32(np.float32(s_in * s) / np.float32(s_out))) for s in s_w]
    scales, shift = split_scales(factors)
    return {"BS_MUL_BYPASS": 0, "BS_MUL_SRC": 1, "BS_MUL_SHIFT_VALUE": shift}, {"BS_MUL": scales}


def _direct_sdp(acc, s_in, s_w, s_out, bias, *, relu, per_filter):
    """The SDP registers derived independently from quantize.py, run with sdp() itself."""
    b16, bshift = quantize_bias_int16(bias, s_in, s_w)
    fields, ops = _rescale_fields(s_in, s_w, s_out, per_filter)
    regs = SdpRegisters(BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=2, BS_ALU_SRC=1,
                        BS_ALU_SHIFT_VALUE=bshift, BS_RELU_BYPASS=0 if relu else 1,
                        **fields)  # fmt: skip
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    operands = {"BS_ALU": np.broadcast_to(b16.reshape(shape), acc.shape)}
    operands.update({k: np.broadcast_to(v.reshape(shape), acc.shape) for k, v in ops.items()})
    return sdp(acc, regs, operands=operands).y.astype(np.int8)


@pytest.mark.parametrize("weights", ["per_kernel", "per_filter"])
def test_conv_layer_equals_cacc_and_sdp_called_directly(weights):
    rng = np.random.default_rng(127)
    w = rng.normal(0, 0.4, (4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.5, 4).astype(np.float32)
    proto = _single("Conv", ["N", 3, 7, 7], {"w": w, "b": b}, pads=[1, 1, 1, 1], strides=[2, 2])
    x = rng.normal(size=(5, 3, 7, 7)).astype(np.float32)
    prog = _compile(proto, x, weights=weights)
    got = prog.run(x, keep="all").tensors["y"].codes
    s_in, s_out = _scale(x), _scale(prog.graph.run_float(x)["y"])
    xq = np.clip(np.rint(x / np.float64(s_in)), -128, 127).astype(np.int64)
    q, s_w = _weights_per_channel(w, weights == "per_filter")
    # CACC steps: one product per (input channel, tap) for every output: P[k] is [N, M, 4, 4]
    xp = np.pad(xq, ((0, 0), (0, 0), (1, 1), (1, 1)))
    steps = [
        q[None, :, c, i, j, None, None] * xp[:, c, None, i : i + 7 : 2, j : j + 7 : 2]
        for c in range(3) for i in range(3) for j in range(3)
    ]  # fmt: skip
    acc = cacc(np.stack(steps), CaccRegisters(PROC_PRECISION=0, CLIP_TRUNCATE=0))
    want = _direct_sdp(acc.y, s_in, s_w, s_out, b, relu=False, per_filter=weights == "per_filter")
    assert got.dtype == np.int8 and np.array_equal(got, want)
    assert np.array_equal(prog.run(x, keep="all").tensors["x"].codes, xq)


def test_dense_layer_with_fused_relu_equals_direct_ops():
    rng = np.random.default_rng(128)
    w = rng.normal(0, 0.2, (6, 20)).astype(np.float32)  # Gemm transB=1: (M, K)
    b = rng.normal(0, 0.3, 6).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fc", transB=1),
        helper.make_node("Relu", ["g"], ["y"], name="relu"),
    ]
    proto = model(nodes, {"x": ["N", 20]}, ["y"], {"w": w, "b": b})
    x = rng.normal(size=(9, 20)).astype(np.float32)
    prog = _compile(proto, x)
    assert len(prog.lowered.layers) == 1  # the ReLU is fused into the SDP's BS unit
    got = prog.run(x, keep="all").tensors["y"].codes
    s_in, s_out = _scale(x), _scale(prog.graph.run_float(x)["y"])
    xq = np.clip(np.rint(x / np.float64(s_in)), -128, 127).astype(np.int64)
    q, s = quantize_weights(w)
    steps = np.moveaxis(xq[:, None, :] * q[None].astype(np.int64), 2, 0)  # [K, N, M]
    acc = cacc(steps, CaccRegisters()).y
    want = _direct_sdp(acc, s_in, np.full(6, s, np.float32), s_out, b, relu=True,
                       per_filter=False)  # fmt: skip
    assert np.array_equal(got, want) and got.min() >= 0


def test_gemm_is_exact_beyond_the_float32_bound():
    # B = 2000 * 127 * 128 > 2^24: a float32 GEMM could round; matmul_exact (which the layer
    # calls with the int8 input's bound 128) picks a type its proof says is exact
    rng = np.random.default_rng(129)
    w = np.where(rng.random((3, 2000)) < 0.5, -1.0, 1.0).astype(np.float32)
    x = rng.normal(size=(4, 2000)).astype(np.float32)
    prog = _compile(_single("Gemm", ["N", 2000], {"w": w}, transB=1), x)
    (layer,) = prog.lowered.layers
    assert layer.weights.dtype == np.int8 and not layer.needs_cacc
    assert "|acc| <= 32512000 < 2^31" in layer.note  # B = 2000 * 127 * 128
    xq = prog.run(x, keep="all").tensors["x"].codes.astype(np.int64)
    out = layer.run([prog.run(x, keep="all").tensors["x"]])
    assert np.array_equal(out.internals["acc"], xq @ (127 * w.T.astype(np.int64)))
    small = _compile(_single("Gemm", ["N", 20], {"w": w[:, :20]}, transB=1), x[:, :20])
    (layer,) = small.lowered.layers
    xq = small.run(x[:, :20], keep="all").tensors["x"]
    out = layer.run([xq])
    want = xq.codes.astype(np.int64) @ (127 * w[:, :20].T.astype(np.int64))
    assert np.array_equal(out.internals["acc"], want)


# --- (d) counters -----------------------------------------------------------------------------


def test_accumulator_saturation_is_modeled_and_counted():
    k = 140_000  # 140000 * 127 * 127 > 2^31: the int32 saturation of CACC engages
    w = np.ones((2, k), np.float32)
    w[1] *= -1
    proto = _single("Gemm", ["N", k], {"w": w}, transB=1)
    x = np.ones((3, k), np.float32)
    prog = _compile(proto, x)
    (layer,) = prog.lowered.layers
    assert layer.needs_cacc and "CACC modeled" in layer.note
    out = layer.run([prog.run(x, keep="all").tensors["x"]])
    assert out.counters["acc_saturated"] == 6
    assert out.internals["acc"].tolist() == [[2**31 - 1, -(2**31)]] * 3
    # the float output is k (= 127 codes); the saturated accumulator yields fewer codes
    assert out.tensor.codes[:, 0].tolist() == [int(out.tensor.codes[0, 0])] * 3
    assert 0 < out.tensor.codes[0, 0] < 127


def test_lut_hit_counters_inside_the_tables():
    proto = _single("Sigmoid", ["N", 4])
    calib = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    prog = _compile(proto, calib)
    layer = prog.lowered.layers[0]
    assert layer.op == "sdp_lut_sigmoid" and "table error" in layer.note
    # +-100 clamp to codes +-127 on entry; every code of that range hits the LO table
    x = np.array([[-100.0, -1.0, 0.5, 100.0]], np.float32)
    counters = prog.run(x, keep="all").counters["sigmoid"]
    assert counters["lut_underflow"] == 0 and counters["lut_overflow"] == 0
    assert counters["lut_lo_hit"] == 4 and counters["output_saturated"] == 0


def test_output_saturation_and_clamp_counters():
    # y = x0 + x1; calibrated on nearly cancelling inputs, so the output scale is tiny
    w = np.ones((1, 2, 1, 1), np.float32)
    calib = np.array([[[[1.0]], [[-0.999]]], [[[-1.0]], [[0.999]]]], np.float32)
    prog = _compile(_single("Conv", ["N", 2, 1, 2], {"w": w}), np.repeat(calib, 2, axis=3))
    s_out = prog.lowered.layers[0].encoding.scale
    x = np.array([[[[0.05, 1.0]], [[0.0, 1.0]]]], np.float32)  # y = 0.05 and 2.0
    assert 0.05 / s_out < 2**16 < 2.0 / s_out  # 17-bit converter step: only 2.0 saturates
    r = prog.run(x, keep="all")
    assert r.counters["conv"] == {"acc_saturated": 0, "output_saturated": 1, "output_clamped": 2}
    assert r.tensors["y"].codes.ravel().tolist() == [127, 127]


def test_lut_flow_counters_beyond_the_table():
    proto = _single("Tanh", ["N", 2])
    prog = _compile(proto, np.array([[-60.0, 60.0]], np.float32))  # s_in = 60/127
    counters = prog.run(np.array([[-60.0, 60.0]], np.float32), keep="all").counters["tanh"]
    # in_scale = 127 / 60: LO starts at floor(-4 * 127 / 60) = -9 with 256 steps of 1 code
    # (it reaches +247, so +60 = code 127 hits it), LE at floor(-8 * 127 / 60) = -17: code
    # -127 lies below both tables (underflow, extrapolated with the secant slope)
    assert counters["lut_underflow"] == 1 and counters["lut_overflow"] == 0
    assert counters["lut_lo_hit"] == 1
    y = prog.run(np.array([[-60.0, 60.0]], np.float32), keep="all").tensors["y"].codes
    assert y.tolist() == [[-127, 127]]


# --- other graph ops --------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
def test_lut_activations_close_to_float(op):
    rng = np.random.default_rng(134)
    x = rng.normal(0, 3, (4, 64)).astype(np.float32)
    prog = _compile(_single(op, ["N", 64]), x)
    assert _dequant_error_lsb(prog, x, "y") <= 1.0


def test_pooling_on_the_pdp_matches_pdp_called_directly():
    rng = np.random.default_rng(135)
    x = rng.normal(size=(2, 3, 9, 9)).astype(np.float32)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], name="max", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["m"], ["y"], name="avg", kernel_shape=[2, 2],
                         strides=[1, 1]),
    ]  # fmt: skip
    prog = _compile(model(nodes, {"x": ["N", 3, 9, 9]}, ["y"]), x)
    r = prog.run(x, keep="all")
    xq = r.tensors["x"].codes
    # ceil_mode: (9 + 2 - 3) / 2 -> ceil 4 + 1 = 5 outputs; the PDP gets one more bottom/right
    # pad row so that its floor formula gives 5 (max ignores padding)
    regs = program_pdp((3, 9, 9), (3, 3), stride=(2, 2), pads=(1, 1, 2, 2),
                       method=PoolingMethod.MAX)  # fmt: skip
    m = np.stack([pdp(xq[i], regs) for i in range(2)])
    assert np.array_equal(r.tensors["m"].codes, m)
    assert r.tensors["m"].encoding == r.tensors["x"].encoding  # the PDP keeps the scale
    avg = program_pdp((3, 5, 5), (2, 2))
    assert np.array_equal(r.tensors["y"].codes, pdp(m, avg))
    # two reciprocal multiplies, each rounding half away: at most 3/4 LSB
    assert _dequant_error_lsb(prog, x, "y") <= 0.75 + 1e-4


def test_global_average_pool_in_stages_and_float_fallback():
    rng = np.random.default_rng(136)
    assert plane_factors(14) == [7, 2] and plane_factors(7) == [7] and plane_factors(11) is None
    x = rng.normal(size=(2, 4, 14, 14)).astype(np.float32)
    prog = _compile(_single("GlobalAveragePool", ["N", 4, 14, 14]), x)
    (layer,) = prog.lowered.layers
    assert len(layer.stages) == 2 and layer.exact and "2 PDP stages" in layer.note
    # each stage rounds after each reciprocal: 7x7 <= 0.5/7 + 0.5, then 2x2 adds 1/4 + 1/2 on
    # top of the first stage's error (averaged): <= 1.33 LSB
    assert _dequant_error_lsb(prog, x, "y") <= 1.33
    x = rng.normal(size=(2, 4, 11, 11)).astype(np.float32)
    prog = _compile(_single("GlobalAveragePool", ["N", 4, 11, 11]), x)
    (layer,) = prog.lowered.layers
    assert not layer.exact and layer.op == "float:GlobalAveragePool"
    # half an LSB of requantization, plus the clamp where the mean of the dequantized codes
    # leaves the range calibrated on the float input
    assert "prime factor" in layer.note and _dequant_error_lsb(prog, x, "y") <= 1.0


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_element_wise_on_sdp_y_with_unequal_scales(op):
    rng = np.random.default_rng(137)
    a = rng.normal(0, 1, (3, 4, 5, 5)).astype(np.float32)
    b = rng.normal(0, 7, (3, 4, 5, 5)).astype(np.float32)  # a much coarser scale
    node = helper.make_node(op, ["a", "b"], ["y"], name="ew")
    proto = model([node], {"a": ["N", 4, 5, 5], "b": ["N", 4, 5, 5]}, ["y"])
    prog = quantemu.compile(load_onnx(proto), backend="nvdla", calib={"a": a, "b": b},
                            progress=False)  # fmt: skip
    r = prog.run_feeds({"a": a, "b": b})
    ideal = r.tensors["a"].dequantize().astype(np.float64)
    other = r.tensors["b"].dequantize().astype(np.float64)
    exact = {"Add": ideal + other, "Sub": ideal - other, "Mul": ideal * other}[op]
    y = r.tensors["y"]
    # the integer path loses at most one output LSB against the quantized inputs' exact result
    assert np.max(np.abs(y.dequantize() - exact)) / y.encoding.scale <= 1.0 + 1e-3


def test_broadcast_mul_by_constant_and_fused_relu_on_add():
    rng = np.random.default_rng(138)
    x = rng.normal(size=(2, 3, 4, 4)).astype(np.float32)
    c = np.array([0.5, -2.0, 1.5], np.float32).reshape(3, 1, 1)
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "x"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    prog = _compile(model(nodes, {"x": ["N", 3, 4, 4]}, ["y"], {"c": c}), x)
    assert [layer.op for layer in prog.lowered.layers] == ["sdp_ew_prod", "sdp_ew_sum"]
    assert len(prog.lowered.layers[1].stages) == 2  # ReLU after the EW sum: a second pass
    assert prog.run(x, keep="all").tensors["y"].codes.min() >= 0
    assert _dequant_error_lsb(prog, x, "y") <= 2.0


def test_fused_leaky_relu_and_clip_on_conv():
    rng = np.random.default_rng(139)
    w = rng.normal(0, 0.5, (3, 2, 1, 1)).astype(np.float32)
    x = rng.normal(size=(4, 2, 5, 5)).astype(np.float32)
    q, s_w = quantize_weights(w)
    for act, attrs in (("LeakyRelu", {"alpha": 0.1}), ("Clip", {})):
        inits = {"w": w}
        ins = ["c"]
        if act == "Clip":
            inits.update(lo=np.array(0.0, np.float32), hi=np.array(0.5, np.float32))
            ins += ["lo", "hi"]
        nodes = [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
            helper.make_node(act, ins, ["y"], name="act", **attrs),
        ]
        prog = _compile(model(nodes, {"x": ["N", 2, 5, 5]}, ["y"], inits), x)
        (layer,) = prog.lowered.layers
        r = prog.run(x, keep="all")
        # the float conv of the dequantized input and weights, then the activation: only the
        # output stage's rounding (half an LSB; the clip bound rounds to a code) remains
        c = np.einsum("nchw,mc->nmhw", r.tensors["x"].dequantize(), q[:, :, 0, 0] * s_w)
        want = np.where(c < 0, 0.1 * c, c) if act == "LeakyRelu" else np.clip(c, 0.0, 0.5)
        y = r.tensors["y"]
        assert np.max(np.abs(y.dequantize() - want)) / y.encoding.scale <= 0.51
        if act == "Clip":
            assert len(layer.stages) == 2 and "clip applied" in layer.note
        else:
            assert layer.stages[0].regs.BN_MUL_PRELU == 1


def test_lrn_concat_softmax_and_layout():
    rng = np.random.default_rng(140)
    x = rng.normal(size=(2, 6, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("LRN", ["x"], ["l"], name="lrn", size=5, alpha=0.5, beta=0.75, bias=1.0),
        helper.make_node("Concat", ["l", "x"], ["c"], name="cat", axis=1),
        helper.make_node("Flatten", ["c"], ["f"], name="flat", axis=1),
        helper.make_node("Softmax", ["f"], ["y"], name="softmax", axis=1),
    ]
    prog = _compile(model(nodes, {"x": ["N", 6, 3, 3]}, ["y"]), x)
    ops = {layer.name: layer for layer in prog.lowered.layers}
    assert ops["lrn"].op == "cdp_lrn" and ops["lrn"].exact
    assert ops["cat"].op == "concat" and "requantized" in ops["cat"].note
    assert not ops["softmax"].exact and "CPU" in ops["softmax"].note
    r = prog.run(x, keep="all")
    assert set(r.counters["lrn"]) >= {"output_saturated", "lut_underflow", "lut_le_hit"}
    assert _dequant_error_lsb(prog, x, "l") <= 3.0
    assert _dequant_error_lsb(prog, x, "c") <= 3.0
    assert np.allclose(r.outputs["y"].sum(axis=1), 1.0, atol=0.05)


def test_resnet18_shaped_model_runs_close_to_float():
    rng = np.random.default_rng(141)
    proto = resnet18(batch="N", size=32, width=8, num_classes=10)
    x = rng.normal(size=(2, 3, 32, 32)).astype(np.float32)
    prog = _compile(proto, x)
    out, ref = prog.run(x, keep="all").outputs["logits"], prog.graph.run_float(x)["logits"]
    cos = float((out * ref).sum() / np.linalg.norm(out) / np.linalg.norm(ref))
    assert cos > 0.98 and all(layer.exact for layer in prog.lowered.layers)


# --- QDQ overrides ----------------------------------------------------------------------------


def _qdq(zero_x):
    rng = np.random.default_rng(142)
    s_x, s_w, s_y = np.float32(0.02), np.array([0.01, 0.03], np.float32), np.float32(0.05)
    w_q = rng.integers(-127, 128, (2, 1, 3, 3)).astype(np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "s_w", "z_w"], ["w"], name="dq_w", axis=0),
        helper.make_node("Conv", ["xd", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "s_y", "z_y"], ["cq"], name="q_y"),
        helper.make_node("DequantizeLinear", ["cq", "s_y", "z_y"], ["y"], name="dq_y"),
    ]
    inits = {"s_x": s_x, "z_x": zero_x, "w_q": w_q, "s_w": s_w, "z_w": np.zeros(2, np.int8),
             "s_y": s_y, "z_y": np.array(0, np.int8)}  # fmt: skip
    return model(nodes, {"x": ["N", 1, 4, 4]}, ["y"], inits), w_q


def test_qdq_overrides_fix_scales_and_weights():
    rng = np.random.default_rng(143)
    proto, w_q = _qdq(np.array(0, np.int8))
    x = rng.normal(size=(2, 1, 4, 4)).astype(np.float32)
    prog = _compile(proto, x)
    conv = next(layer for layer in prog.lowered.layers if layer.name == "conv")
    assert np.array_equal(conv.weights, w_q.astype(np.float32))  # the file's integers
    assert conv.encoding.scale == pytest.approx(0.05)  # adopted from the saturate Clip
    assert "BS_MUL" in conv.stages[0].channel_operands  # per-axis weights: per-channel rescale
    assert prog.run(x, keep="all").tensors["xd"].encoding.scale == pytest.approx(0.02)


def test_qdq_uint8_activation_is_rejected():
    rng = np.random.default_rng(144)
    proto, _ = _qdq(np.array(128, np.uint8))
    with pytest.raises(UnsupportedError, match=r"symmetric int8 \(zero point 0\)"):
        _compile(proto, rng.normal(size=(1, 1, 4, 4)).astype(np.float32))


# --- (c) errors -------------------------------------------------------------------------------


def _small_graph():
    proto = _single("Relu", ["N", 4])
    graph = optimize(load_onnx(proto))
    ranges = CalibrationRanges({"x": TensorRange(-1.0, 1.0), "y": TensorRange(0.0, 1.0)},
                               observer="minmax")  # fmt: skip
    return graph, ranges


def test_option_errors_name_the_option_and_the_choices():
    graph, ranges = _small_graph()
    with pytest.raises(InvalidInputError, match=r"unknown option\(s\) 'isa'; the options are "
                       r"weights \(per_kernel\|per_filter\), rescale"):  # fmt: skip
        _lower(graph, ranges, isa="avx2")
    with pytest.raises(InvalidInputError, match="weights = 'per_channel'; choose one of "
                       "'per_kernel', 'per_filter'"):  # fmt: skip
        _lower(graph, ranges, weights="per_channel")
    with pytest.raises(InvalidInputError, match="weights='per_filter' is not valid; choose "
                       "one of per_kernel, per_filter"):  # fmt: skip
        Options(weights="per_filter")  # an Options built directly gets no coercion
    with pytest.raises(InvalidInputError, match="rescale=output_converter cannot express"):
        _lower(graph, ranges, weights="per_filter", rescale="output_converter")
    with pytest.raises(InvalidInputError, match="no calibrated range for tensor 'x'"):
        _lower(graph, CalibrationRanges({}, observer="minmax"))
    model_ = _lower(graph, ranges, scale_split="exact", rescale="bs_mul")
    assert model_.header["option.scale_split"] == "exact"
    with pytest.raises(InvalidInputError, match="typed options"):
        lower(graph, ranges, {"weights": "per_filter"})


def _lower(graph, ranges, **options):
    """``lower()`` with keyword options, typed as a run's plan types them."""
    return lower(graph, ranges, Options.from_mapping(options))


def test_unsupported_ops_are_clear_errors():
    proto = _single("Erf", ["N", 4])
    with pytest.raises(UnsupportedError, match=r"Erf 'erf' uses Erf.*"
                       r"supported ops: .*Conv"):  # fmt: skip
        _compile(proto, np.ones((1, 4), np.float32))
    x = np.ones((1, 1, 12, 12), np.float32)
    with pytest.raises(UnsupportedError, match=r"kernel \(9, 9\) \(PDP kernels are 1..8\)"):
        _compile(_single("MaxPool", ["N", 1, 12, 12], kernel_shape=[9, 9]), x)
    with pytest.raises(UnsupportedError, match="count_include_pad=0"):
        _compile(_single("AveragePool", ["N", 1, 12, 12], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]), x)  # fmt: skip
    with pytest.raises(UnsupportedError, match="LRN size 4"):
        _compile(_single("LRN", ["N", 1, 12, 12], size=4), x)


# --- the backend capabilities lowering added --------------------------------------------------


def test_pdp_accepts_a_batch_and_sdp_broadcasts_operands():
    rng = np.random.default_rng(148)
    x = rng.integers(-128, 128, (3, 2, 5, 5)).astype(np.int8)
    regs = program_pdp((2, 5, 5), (3, 3), stride=(2, 2), pads=(1, 1, 1, 1))
    assert np.array_equal(pdp(x, regs), np.stack([pdp(x[i], regs) for i in range(3)]))
    with pytest.raises(InvalidInputError, match=r"or \(N, C, H, W\) for a batch"):
        pdp(x[:, :1], regs)
    acc = rng.integers(-5000, 5000, (2, 3, 4)).astype(np.int64)
    regs = SdpRegisters(BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=2, BS_ALU_SRC=1, CVT_SCALE=3,
                        CVT_SHIFT=5)  # fmt: skip
    bias = np.array([100, -7, 3], np.int16).reshape(1, 3, 1)
    full = sdp(acc, regs, operands={"BS_ALU": np.broadcast_to(bias, acc.shape).copy()})
    small = sdp(acc, regs, operands={"BS_ALU": bias})
    assert np.array_equal(full.y, small.y) and full.counters() == small.counters()
    # y = rhaz(3 (v + b) / 32) never leaves 17 bits; the final int8 clamp changes the rest
    z = (acc + bias) * 3
    t = np.sign(z) * np.floor(np.abs(z) / 32 + 0.5)
    assert small.OUT_SATURATION == 0
    assert small.final_clamped == int(np.count_nonzero((t > 127) | (t < -128))) > 0


def test_standalone_batchnorm_and_prelu_on_the_sdp():
    rng = np.random.default_rng(149)
    c = 3
    params = {
        "g": np.array([0.5, -1.5, 2.0], np.float32),
        "beta": np.array([0.3, -0.2, 1.0], np.float32),
        "mu": np.array([0.1, 0.0, -0.4], np.float32),
        "var": np.array([1.0, 0.25, 2.0], np.float32),
        "slope": np.array([0.25, 0.1, -0.5], np.float32).reshape(c, 1, 1),
    }
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], name="pool", kernel_shape=[1, 1]),
        helper.make_node("BatchNormalization", ["m", "g", "beta", "mu", "var"], ["b"],
                         name="bn"),
        helper.make_node("PRelu", ["b", "slope"], ["y"], name="prelu"),
    ]  # fmt: skip
    x = rng.normal(size=(4, c, 5, 5)).astype(np.float32)
    prog = _compile(model(nodes, {"x": ["N", c, 5, 5]}, ["y"], params), x)
    ops = [layer.op for layer in prog.lowered.layers]
    assert ops == ["pdp_max", "sdp_x_batchnorm", "sdp_x_prelu"]
    r = prog.run(x, keep="all")
    b, y = r.tensors["b"], r.tensors["y"]
    a = params["g"] / np.sqrt(params["var"] + np.float32(1e-5))
    want = r.tensors["m"].dequantize() * a.reshape(1, c, 1, 1)
    want += (params["beta"] - params["mu"] * a).reshape(1, c, 1, 1)
    # half an LSB of rounding plus the truncated int16 scales (one shift for all channels)
    assert np.max(np.abs(b.dequantize() - want)) / b.encoding.scale <= 0.55
    slope_codes = np.where(b.codes < 0, b.codes * params["slope"][None], b.codes)
    assert y.encoding == b.encoding  # PReLU on the codes keeps the scale
    assert np.max(np.abs(y.codes - slope_codes)) <= 0.5
