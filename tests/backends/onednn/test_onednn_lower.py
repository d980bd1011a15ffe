"""Whole-model lowering onto oneDNN as PyTorch runs it: the demo end to end, single layers
against the backend operators called directly, the ATen kernels and a whole quantized model
against PyTorch 2.13 bit for bit, errors, options and counters."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import quantemu
from quantemu.backends.onednn import (
    ConvImpl,
    QuantizedImpl,
    Requantization,
    activation_qparams,
    conv2d,
    exact_matmul,
    quantized_conv2d,
    quantized_linear,
    requantize,
    weight_scales,
)
from quantemu.backends.onednn.aten import (
    TorchU8Encoding,
    avg_pool2d_nhwc,
    fma_f32,
    global_avg_pool_nhwc,
    quantize_per_tensor,
    quantized_add,
)
from quantemu.backends.onednn.f32 import rr
from quantemu.backends.onednn.lower import Options, lower
from quantemu.calibration.ranges import TensorRange
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx, optimize, zoo
from quantemu.program import run_lowered
from tests.backends.onednn.lower_models import TENSORS, model_spec, qdq_model, qparams
from tests.backends.onednn.peer_runner import (
    AVX512_CORE_FLAGS,
    CAPS,
    conv_family,
    cpu_flags,
    host_isa,
    impl_name,
    linear_family,
    run_peer_script,
)
from tests.graph.onnx_models import model, weights

PEER = Path(__file__).with_name("peer_model.py")
F32 = np.float32


def _lower(graph, ranges, **options):
    """``lower()`` with keyword options, typed as a run's plan types them."""
    return lower(graph, ranges, Options.from_mapping(options))


def _compile(proto, calib, **options):
    return quantemu.compile(
        load_onnx(proto), backend="onednn", calib=calib, progress=False, **options
    )


def _conv_model(c_in, c_out, k, *, group=1, stride=1, pad=1, act=None, seed=0):
    w = weights((c_out, c_in // group, k, k), seed=seed)
    b = weights((c_out,), seed=seed + 1, scale=0.3)
    out = "conv" if act else "y"
    attrs = {"group": group, "strides": [stride, stride], "pads": [pad] * 4}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], [out], name="conv", **attrs)]
    if act:
        nodes.append(helper.make_node(act, [out], ["y"]))
    return model(nodes, {"x": ["N", c_in, 7, 7]}, ["y"], {"w": w, "b": b}), w, b


def _calib(shape, seed=3, shift=0.0):
    return (np.random.default_rng(seed).normal(size=shape) + shift).astype(F32)


def _ranges(**tensors):
    return {name: TensorRange(lo, hi) for name, (lo, hi) in tensors.items()}


# -- (a) the demo end to end -------------------------------------------------------------------


def test_demo_accuracy_close_to_float():
    """The demo lowers exactly (no fallback) and keeps its accuracy: measured 0.9917 on the
    test split for float and for the default avx512_core_vnni lowering."""
    x_calib, _ = demo_dataset("calib")
    x_test, y_test = demo_dataset("test")
    program = quantemu.compile(demo_model_path(), backend="onednn", calib=x_calib, progress=False)
    assert all(layer.exact for layer in program.lowered.layers)
    ops = [layer.op.split(" ")[0] for layer in program.lowered.layers]
    assert ops == [
        "quantized::conv2d_relu",
        "quantized::conv2d_relu",
        "quantized::conv2d",
        "quantized::add_relu",
        "quantized::max_pool2d",
        "quantized::conv2d_relu",
        "quantized::avg_pool2d",
        "flatten",
        "quantized::linear",
    ]
    result = program.run(x_test, keep="all")
    accuracy = float((result.outputs["logits"].argmax(axis=1) == y_test).mean())
    assert accuracy >= 0.98
    header = program.lowered.header
    assert header["isa"] == "avx512_core_vnni" and "oneDNN 3.12.0" in header["library"]


# -- (b) single layers against the operators called directly -----------------------------------


@pytest.mark.parametrize("isa", ["avx2", "avx512_core_vnni"])
def test_conv_layer_equals_quantized_conv2d(isa):
    """A lowered conv gives exactly the integers of quantized_conv2d called with parameters
    derived independently here (PyTorch's observers, binary32 rne(w·rr(s)) weights)."""
    proto, w, b = _conv_model(4, 6, 3, stride=2)
    x_calib = _calib((16, 4, 7, 7), shift=0.5)
    program = _compile(proto, x_calib, isa=isa)
    (layer,) = program.lowered.layers
    sx, zx = activation_qparams(*program.ranges["x"])
    sy, zy = activation_qparams(*program.ranges["y"])
    ws = weight_scales(w)
    codes = np.clip(np.rint(w * rr(ws)[:, None, None, None]), -128, 127).astype(np.int8)
    assert layer.params.quant == Requantization(sx, zx, tuple(ws.tolist()), sy, zy)
    assert zx > 0 and np.array_equal(layer.weight, codes)
    assert layer.params.impl is (QuantizedImpl.JIT_UNI if isa == "avx2" else QuantizedImpl.BRGEMM)
    x = _calib((3, 4, 7, 7), seed=9, shift=0.5)
    run = program.run(x, keep="all")
    direct = quantized_conv2d(run.tensors["x"].codes, codes, layer.params, b)
    assert np.array_equal(run.tensors["y"].codes, direct.y)
    assert run.tensors["y"].codes.dtype == np.uint8


def test_dense_layer_equals_quantized_linear():
    """Gemm (transB = 0, alpha, beta) -> quantized_linear with W = alpha·B^T, bias = beta·C."""
    b_mat = weights((24, 5), seed=4)
    c = weights((5,), seed=5, scale=0.5)
    node = helper.make_node("Gemm", ["x", "B", "C"], ["y"], name="fc", alpha=0.5, beta=2.0)
    proto = model([node], {"x": ["N", 24]}, ["y"], {"B": b_mat, "C": c})
    program = _compile(proto, _calib((32, 24)), isa="avx2")
    (layer,) = program.lowered.layers
    w = (b_mat.T * F32(0.5)).astype(F32)
    ws = weight_scales(w)
    codes = np.clip(np.rint(w * rr(ws)[:, None]), -128, 127).astype(np.int8)
    assert np.array_equal(layer.weight, codes)
    assert np.array_equal(layer.bias, c * F32(2.0))
    assert layer.params.impl is QuantizedImpl.JIT_UNI  # gemm:jit on avx2
    run = program.run(_calib((8, 24), seed=11), keep="all")
    direct = quantized_linear(run.tensors["x"].codes, codes, layer.params, layer.bias)
    assert np.array_equal(run.tensors["y"].codes, direct.y)


def test_relocated_conv_uses_its_pairing_order():
    """C/groups = 1 on avx512_core: brg_conv_fwd relocates (relo_wh); the layer pairs that way."""
    proto, _, b = _conv_model(1, 8, 3)
    program = _compile(proto, _calib((8, 1, 7, 7)), isa="avx512_core")
    (layer,) = program.lowered.layers
    assert layer.conv.impl is ConvImpl.RELO_WH
    x = program.run(_calib((2, 1, 7, 7), seed=2), keep="all").tensors
    acc = conv2d(x["x"].codes, layer.weight, layer.conv).acc
    y = requantize(acc, 1, layer.params.quant, layer.params.impl, w_round_trip=False, bias=b)
    assert np.array_equal(x["y"].codes, y)
    pinned = _compile(proto, _calib((8, 1, 7, 7)), isa="avx512_core", conv_impl={"conv": "ref"})
    assert pinned.lowered.layers[0].params.impl is QuantizedImpl.REF  # ref pins both orders


def test_fused_relu_keeps_codes_at_the_zero_point():
    """conv2d_relu: codes max(y, zp) (a ReLU before the output scale cannot go below zp)."""
    proto, _, b = _conv_model(3, 4, 3, act="Relu")
    graph = optimize(load_onnx(proto))
    out = graph.outputs[0]
    lowered = lower(graph, _ranges(x=(-2.0, 2.0), **{out: (-1.0, 3.0)}))
    layer = lowered.layers[0]
    zp = layer.encoding.zp
    assert zp > 0 and (layer.lo, layer.hi) == (zp, 255)
    run = run_lowered(lowered, graph.outputs, {"x": _calib((2, 3, 7, 7))})
    plain = quantized_conv2d(run.tensors["x"].codes, layer.weight, layer.params, b).y
    assert np.array_equal(run.tensors[out].codes, np.maximum(plain, zp))
    assert (plain < zp).any()


# -- (c) errors and options --------------------------------------------------------------------


def _tiny_graph():
    proto, _, _ = _conv_model(2, 2, 3)
    graph = optimize(load_onnx(proto))
    return graph, _ranges(x=(-1.0, 1.0), y=(-2.0, 2.0))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"isa": "avx512"}, "option isa = 'avx512'; choose one of 'avx2', 'avx512_core'"),
        ({"bogus": 1}, "onednn: unknown option(s) 'bogus'; the options are isa (avx2|"),
        ({"reduce_range": 2}, "option reduce_range = 2 must be True or False"),
        ({"threads": 0}, "option threads = 0 must be >= 1"),
        ({"linear_impl": "ref"}, "PyTorch's linear runs 'jit_uni'"),
        ({"conv_impl": {"conv": "diagonal"}}, "option conv_impl['conv'] = 'diagonal'"),
        ({"fallback": "cpu"}, "option fallback = 'cpu'; choose one of 'float', 'error'"),
        ({"linear_impl": {"conv": "brgemm"}}, "option linear_impl names 'conv', which are not"),
    ],
)
def test_bad_options(options, message):
    graph, ranges = _tiny_graph()
    with pytest.raises(InvalidInputError) as info:
        _lower(graph, ranges, **options)
    assert message in str(info.value)


def _softmax_graph():
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)]
    return optimize(load_onnx(model(nodes, {"x": ["N", 6]}, ["y"])))


def test_unsupported_op_errors_or_falls_back():
    graph = _softmax_graph()
    ranges = _ranges(x=(-3.0, 3.0), y=(0.0, 1.0))
    with pytest.raises(UnsupportedError) as info:
        _lower(graph, ranges, fallback="error")
    text = str(info.value)
    assert "node 'sm' (Softmax): no integer lowering" in text
    assert "integer lowerings exist for Add, AveragePool, Clip, Conv" in text
    (layer,) = lower(graph, ranges).layers
    assert not layer.exact and layer.op == "float:Softmax" and "float fallback" in layer.note
    run = run_lowered(lower(graph, ranges), graph.outputs, {"x": _calib((4, 6))})
    want = graph.run_float(run.tensors["x"].dequantize())["y"]  # float op on the codes' values
    np.testing.assert_allclose(run.outputs["y"], want, atol=0.5 / 255 + 1e-7)


def test_missing_range_and_unrepresentable_overrides():
    graph, _ = _tiny_graph()
    with pytest.raises(InvalidInputError, match="no calibrated range for tensor 'y'"):
        lower(graph, _ranges(x=(-1.0, 1.0)))
    # A per-axis activation quantization in the file: not PyTorch's per-tensor scheme.
    inits = {"s": np.array([0.1, 0.2], F32), "z": np.array([3, 4], np.uint8)}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["xd"], axis=1),
        helper.make_node("Relu", ["xd"], ["y"]),
    ]
    per_axis = optimize(load_onnx(model(nodes, {"x": ["N", 2, 3, 3]}, ["y"], inits)))
    with pytest.raises(UnsupportedError, match="quantized per axis in the file"):
        lower(per_axis, _ranges(x=(-1.0, 1.0), y=(0.0, 1.0)))


def test_s8_override_becomes_u8_and_maxpool_keeps_qparams():
    """An int8 Q/DQ pair is u8 with zero point + 128; a MaxPool output quantized differently
    from its input cannot be PyTorch's max_pool2d."""
    inits = {"s": np.array(0.05, F32), "z": np.array(-10, np.int8)}
    inits |= {"s2": np.array(0.07, F32), "z2": np.array(-10, np.int8)}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["xd"]),
        helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["p", "s2", "z2"], ["q2"]),
        helper.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["y"]),
    ]
    graph = optimize(load_onnx(model(nodes, {"x": ["N", 2, 4, 4]}, ["y"], inits)))
    with pytest.raises(UnsupportedError, match="keeps its input's scale and zero point"):
        lower(graph, {})
    inits["s2"], inits["z2"] = inits["s"], inits["z"]
    graph = optimize(load_onnx(model(nodes, {"x": ["N", 2, 4, 4]}, ["y"], inits)))
    lowered = lower(graph, {})
    assert lowered.input_encodings["x"].same_params(TorchU8Encoding(float(F32(0.05)), 118))


def test_reduce_range_uses_seven_bit_activations():
    graph, ranges = _tiny_graph()
    lowered = _lower(graph, ranges, reduce_range=True)
    assert lowered.input_encodings["x"].scale == activation_qparams(-1.0, 1.0, reduce_range=True)[0]
    assert lowered.header["reduce_range"] == "True"


# -- (d) counters --------------------------------------------------------------------------------


def test_counters_report_pair_and_output_saturation():
    """Weights near +127 against inputs near 255: VPMADDUBSW pairs saturate on avx2, never on
    VNNI; an output range far too small saturates the outputs on both."""
    w = np.full((4, 8, 3, 3), 0.5, F32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    graph = optimize(load_onnx(model(nodes, {"x": ["N", 8, 5, 5]}, ["y"], {"w": w})))
    ranges = _ranges(x=(0.0, 1.0), y=(-0.5, 0.5))
    x = np.full((2, 8, 5, 5), 1.0, F32)
    for isa, pairs in (("avx2", True), ("avx512_core_vnni", False)):
        result = run_lowered(_lower(graph, ranges, isa=isa), graph.outputs, {"x": x})
        counters = result.counters["conv"]
        assert (counters["pair_saturated"] > 0) == pairs
        assert counters["output_saturated"] == 2 * 4 * 25  # every output clamps at 255
        assert result.tensors["y"].codes.max() == 255
    pair_free = run_lowered(_lower(graph, ranges, isa="avx2"), graph.outputs, {"x": x * 0.4})
    assert pair_free.counters["conv"]["pair_saturated"] == 0


@pytest.mark.slow
def test_resnet18_lowers_exactly_and_runs():
    graph = optimize(quantemu.load_onnx(zoo.resnet18()))
    x = _calib((1, 3, 224, 224))
    lowered = lower(graph, quantemu.calibrate(graph, x))
    assert all(layer.exact for layer in lowered.layers)
    assert {layer.op.split(" ")[0] for layer in lowered.layers} >= {
        "quantized::adaptive_avg_pool2d",
        "quantized::add_relu",
        "quantized::conv2d_relu",
    }
    result = run_lowered(lowered, graph.outputs, {graph.inputs[0].name: x})
    assert result.outputs[graph.outputs[0]].shape == (1, 1000)


def test_exact_matmul_splits_long_reductions():
    """Sums far beyond 2**24 (where one float32 GEMM rounds): the float32 runs stay exact,
    also from the cache of a read-only operand."""
    rng = np.random.default_rng(5)
    a = rng.integers(200, 256, (40, 3001)).astype(np.uint8)
    b = rng.integers(90, 128, (3001, 6)).astype(np.int8)
    b[::7] *= -1
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert np.abs(want).max() > 2**25
    assert not np.array_equal(np.matmul(a.astype(F32), b.astype(F32)).astype(np.int64), want)
    assert np.array_equal(exact_matmul(a, b), want)
    b.setflags(write=False)
    assert np.array_equal(exact_matmul(a, b), want)
    assert np.array_equal(exact_matmul(a, b), want)  # cached runs


# -- the ATen kernels against torch, bit for bit --------------------------------------------------


@pytest.fixture(scope="module")
def torch():
    module = pytest.importorskip(
        "torch", reason="torch is not installed: pip install torch==2.13.0"
    )
    warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")
    module.backends.quantized.engine = "onednn"
    return module


def _q(torch, codes, enc):
    """A quint8 tensor of ``codes``, channels-last when 4-D (as quantized convs produce)."""
    t = torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), enc.scale, enc.zp)
    return t.contiguous(memory_format=torch.channels_last) if codes.ndim == 4 else t


def _encodings(rng, n):
    return [TorchU8Encoding(rng.uniform(0.002, 0.1), int(rng.integers(0, 256))) for _ in range(n)]


def test_fma_f32_is_correctly_rounded():
    # 1 + 2**-24 is a tie between 1 and 1 + 2**-23: the exact product decides it.
    a = F32(1 + 2**-12)
    assert fma_f32(a, a, F32(-1)) == F32(2**-11 + 2**-24)
    assert fma_f32(F32(1), F32(1), F32(2**-24)) == F32(1)  # exact tie: to even
    assert fma_f32(F32(1), F32(1 + 2**-23), F32(2**-24)) == F32(1 + 2**-22)


@pytest.mark.peer
def test_quantize_per_tensor_matches_torch(torch):
    rng = np.random.default_rng(1)
    for enc in _encodings(rng, 40):
        k = rng.integers(-300, 300, 400)
        x = ((k + 0.5) * enc.scale).astype(F32)  # ties of x/s, nudged by one ulp either way
        x = np.nextafter(x, x + rng.choice([-1, 0, 1], x.shape).astype(F32)).astype(F32)
        want = torch.quantize_per_tensor(torch.from_numpy(x), enc.scale, enc.zp, torch.quint8)
        assert np.array_equal(quantize_per_tensor(x, enc.scale, enc.zp), want.int_repr().numpy())


def _divergent_pairs(encodings):
    """(a, b) codes on which quantized::add's vector body and scalar tail round differently.

    Body: ``rne((fma(sa, a, sa·−za) + fma(sb, b, sb·−zb)) ⊗ rr(so)) + zo``; tail:
    ``rne(zo + (sa ⊗ (a − za) + sb ⊗ (b − zb)) ⊗ rr(so))`` (ATen 2.13, see onednn.aten).
    """
    ea, eb, eo = encodings
    a, b = (g.ravel() for g in np.meshgrid(np.arange(256), np.arange(256)))
    sa, sb, inv = F32(ea.scale), F32(eb.scale), rr(F32(eo.scale))
    af, bf = a.astype(F32), b.astype(F32)
    body = fma_f32(sa, af, sa * F32(-ea.zp)) + fma_f32(sb, bf, sb * F32(-eb.zp))
    body = np.rint(body * inv) + eo.zp
    tail = sa * (a - ea.zp).astype(F32) + sb * (b - eb.zp).astype(F32)
    tail = np.rint(F32(eo.zp) + tail * inv)
    differ = np.clip(body, 0, 255) != np.clip(tail, 0, 255)
    return a[differ].astype(np.uint8), b[differ].astype(np.uint8)


@pytest.mark.peer
def test_quantized_add_matches_torch_body_and_tails(torch):
    """Operands chosen where the FMA body and the scalar tail round differently, in shapes
    whose tails (64-element blocks, 2-thread ranges above the grain) fall in varied places."""
    rng = np.random.default_rng(2)
    checked = 0
    while checked < 6:
        encodings = _encodings(rng, 3)
        pa, pb = _divergent_pairs(encodings)
        if pa.size == 0:
            continue
        checked += 1
        for shape, threads in (((1, 7, 5, 3), 1), ((2, 5, 61, 120), 2), ((3, 100), 1)):
            idx = rng.integers(0, pa.size, int(np.prod(shape)))
            a, b = pa[idx].reshape(shape), pb[idx].reshape(shape)
            torch.set_num_threads(threads)
            for relu in (False, True):
                op = torch.ops.quantized.add_relu if relu else torch.ops.quantized.add
                qa, qb = _q(torch, a, encodings[0]), _q(torch, b, encodings[1])
                want = op(qa, qb, encodings[2].scale, encodings[2].zp).int_repr().numpy()
                got, _ = quantized_add(a, b, tuple(encodings), relu=relu, threads=threads)
                assert np.array_equal(got, want), (shape, threads, relu)
                if a.ndim == 4:  # codes in NHWC memory, as a lowered conv leaves them
                    a2, b2 = (np.ascontiguousarray(t.transpose(0, 2, 3, 1)) for t in (a, b))
                    a2, b2 = a2.transpose(0, 3, 1, 2), b2.transpose(0, 3, 1, 2)
                    got, _ = quantized_add(a2, b2, tuple(encodings), relu=relu, threads=threads)
                    assert np.array_equal(got, want), (shape, threads, relu, "nhwc")
    torch.set_num_threads(1)


def _with_sums(sums, n, shape_hw):
    """uint8 windows (one per channel) with the given code sums over ``n`` elements."""
    x = np.zeros((len(sums), n), np.int64)
    base, extra = np.divmod(np.asarray(sums), n)
    x[:] = base[:, None]
    x += np.arange(n)[None, :] < extra[:, None]
    return x.reshape(1, len(sums), *shape_hw).astype(np.uint8)


def _avg(x, window, include, enc):
    kernel, strides, pads = window
    return avg_pool2d_nhwc(
        x,
        kernel=kernel,
        strides=strides,
        pads=pads,
        count_include_pad=include,
        e_in=enc,
        e_out=enc,
    )


@pytest.mark.peer
def test_average_pools_match_torch_on_rounding_boundaries(torch):
    """avg_pool2d and adaptive_avg_pool2d on channels-last input: accumulators placed where
    the vector channels (one rounding) and the remaining channels (two) round apart."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        (enc,) = _encodings(rng, 1)
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        n = kh * kw
        channels = int(rng.integers(17, 40))
        sums = rng.integers(0, 255 * n + 1, channels)
        sums[rng.random(channels) < 0.5] = enc.zp * n + n // 2  # ties of (sum - zp·n) / n
        x = _with_sums(sums, n, (kh, kw))
        qx = _q(torch, x, enc)
        want = torch.nn.functional.avg_pool2d(qx, (kh, kw)).int_repr().numpy()
        got = _avg(x, ((kh, kw), (kh, kw), (0, 0)), True, enc)
        assert np.array_equal(got, want)
        want = torch.nn.functional.adaptive_avg_pool2d(qx, 1).int_repr().numpy()
        assert np.array_equal(global_avg_pool_nhwc(x, enc, enc), want)
    x = rng.integers(0, 256, (2, 21, 7, 6)).astype(np.uint8)
    for pads, include in (((1, 1), True), ((1, 0), False)):
        want = torch.nn.functional.avg_pool2d(
            _q(torch, x, enc), 3, 2, pads, count_include_pad=include
        )
        got = _avg(x, ((3, 3), (2, 2), pads), include, enc)
        assert np.array_equal(got, want.int_repr().numpy())


# -- the whole model against PyTorch's quantized model (engine onednn), per ISA ------------------


def _run_model_peer(cap: str | None, tmp: Path):
    spec = model_spec()
    meta = {name: qparams(name) for name in ("x", *TENSORS)}
    outputs, lines, version = run_peer_script(PEER, spec, meta, cap, tmp)
    return spec, outputs, lines, version


@pytest.mark.peer
@pytest.mark.parametrize("cap", list(CAPS))
def test_whole_model_equals_pytorch_onednn(cap, tmp_path):
    """The QDQ model (qparams fixed by the user) lowered and simulated gives PyTorch's codes for
    every tensor: oneDNN convolutions and linears (families from ONEDNN_VERBOSE), fused ReLU
    with a non-zero zero point, ATen's add_relu, max/avg/adaptive pools, flatten."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: pip install torch==2.13.0 (CPU) to run the peer")
    flags = cpu_flags()
    if cap == "AVX2" and "avx2" not in flags:
        pytest.skip("this CPU has no AVX2")
    if cap == "AVX512_CORE" and not flags >= AVX512_CORE_FLAGS:
        pytest.skip("this CPU lacks AVX-512 core")
    isa = CAPS[cap] or host_isa(flags)
    if isa is None:
        pytest.skip("this CPU has no AVX2: oneDNN's SSE4.1 int8 path is not emulated")
    spec, want, lines, version = _run_model_peer(None if cap == "unset" else cap, tmp_path)
    if not version.startswith("3.12"):
        pytest.skip(f"oneDNN {version or '?'} is bundled; the emulation pins 3.12 (torch 2.13.0)")
    families = {
        name: conv_family(impl_name(lines[name], "convolution"))
        for name in ("conv1", "conv2", "dw")
    }
    options = {
        "isa": isa,
        "conv_impl": {name: f[0] for name, f in families.items()},
        "quantized_conv_impl": {name: f[1] for name, f in families.items()},
        "linear_impl": {n: linear_family(impl_name(lines[n], "matmul")) for n in ("fc1", "fc2")},
    }
    graph = optimize(load_onnx(qdq_model(spec)))
    result = run_lowered(_lower(graph, {}, **options), graph.outputs, {"input": spec["x"]})
    for name in TENSORS:
        got = result.tensors[name].codes
        assert got.shape == want[name].shape and got.dtype == np.uint8
        assert np.array_equal(got, want[name]), (
            f"{name} on {isa.value}: {int((got != want[name]).sum())} codes differ"
        )
    if not isa.exact:
        assert result.counters["conv1"]["pair_saturated"] > 0  # the check covers saturation


def test_qdq_model_lowers_without_fallback():
    spec = model_spec()
    graph = optimize(load_onnx(qdq_model(spec)))
    lowered = lower(graph, {})
    assert all(layer.exact for layer in lowered.layers)
    weights_used = {
        layer.name: layer.weight for layer in lowered.layers if hasattr(layer, "weight")
    }
    for name in ("conv1", "conv2", "dw", "fc1", "fc2"):
        assert np.array_equal(weights_used[name], spec[f"{name}/w"])
