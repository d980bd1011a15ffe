"""The zoo encoder block on onednn against PyTorch 2.13's own quantized Linear, on 3-D input.

Both exporters' ONNX files are lowered onto onednn (ISA: the host's, as uncapped PyTorch runs it);
for every ``quantized::linear`` layer a ``torch.ao.nn.quantized.Linear`` is rebuilt from the
layer's own parameters (input/output qparams, per-channel s8 weight codes and scales, f32 bias)
and fed quantemu's input codes for that layer as a ``quint8`` tensor of shape ``(N, T, C)``, the
shape PyTorch's x86 FX flow hands it (``QuantizedLinear`` on the 3-D output of a quantized
LayerNorm). The output codes must be equal, element for element.

The attention's scale Mul is ``quantized::mul`` by a Scalar in the x86 FX flow; quantemu lowers
it so (``QMulScalarLayer``) and both are checked against ``torch.ops.quantized.mul``, codes and
output qparams.

Engine ``onednn`` is what the backend emulates. Engine ``x86`` routes ``quantized::linear``
to FBGEMM, not oneDNN; it is checked too, because the x86 qconfig is what users pick, and on
these layers it agrees.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # the default exporter needs it

from onnx import helper  # noqa: E402

import quantemu  # noqa: E402
from quantemu.backends.onednn.lower import lower  # noqa: E402
from quantemu.backends.onednn.lower.elementwise import QMulScalarLayer  # noqa: E402
from quantemu.backends.onednn.lower.linear import QLinearLayer  # noqa: E402
from quantemu.calibration.ranges import TensorRange  # noqa: E402
from quantemu.graph import load_onnx, optimize  # noqa: E402
from tests.backends.onednn.peer_runner import cpu_flags, host_isa  # noqa: E402
from tests.graph.onnx_models import model  # noqa: E402
from tests.zoo.torch_models import ZOO, compiled_export  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")

SAMPLES = 4


@pytest.fixture(scope="module")
def isa():
    found = host_isa(cpu_flags())
    if found is None:
        pytest.skip("this CPU has no int8 code path that the backend emulates")
    return found


@pytest.fixture(scope="module", params=["torchscript", "dynamo"])
def lowered_run(request, tmp_path_factory, isa):
    """(program, per-sample run results) of the encoder export by one exporter."""
    folder = tmp_path_factory.mktemp("enc")
    program, rng = compiled_export("encoder", request.param, folder, "onednn", isa=isa.value)
    shape = ZOO["encoder"][1][1:]
    x = rng.standard_normal((SAMPLES, *shape)).astype(np.float32)
    # The default exporter fixes the batch at 1: run sample by sample.
    return program, [program.run(x[i : i + 1], keep="all") for i in range(SAMPLES)]


def _torch_linear(layer: QLinearLayer):
    """``torch.ao.nn.quantized.Linear`` holding exactly the layer's parameters."""
    q = layer.params.quant
    n_out, k = layer.weight.shape
    scales = torch.tensor(q.w_scales, dtype=torch.float64)
    weight = torch._make_per_channel_quantized_tensor(
        torch.from_numpy(np.array(layer.weight)), scales, torch.zeros(n_out, dtype=torch.long), 0
    )
    module = torch.ao.nn.quantized.Linear(k, n_out)
    bias = None if layer.bias is None else torch.from_numpy(np.array(layer.bias))
    module.set_weight_bias(weight, bias)
    module.scale, module.zero_point = float(q.y_scale), int(q.y_zero_point)
    return module


def _three_d_input(program, run, layer: QLinearLayer) -> np.ndarray:
    """The codes of the 3-D tensor that the layer's (N*T, C) input flattens."""
    (flat,) = layer.inputs
    producers = {lay.output: lay for lay in program.lowered.layers}
    source = producers[flat].inputs[0] if flat in producers else flat
    codes = run.tensors[source].codes
    assert codes.ndim == 3, f"{layer.name}: input {source} has shape {codes.shape}"
    assert np.array_equal(codes.reshape(run.tensors[flat].codes.shape), run.tensors[flat].codes)
    return codes


@pytest.mark.parametrize("engine", ["onednn", "x86"])
def test_linear_layers_on_3d_input_equal_torch_quantized_linear(lowered_run, engine):
    program, runs = lowered_run
    linears = [lay for lay in program.lowered.layers if isinstance(lay, QLinearLayer)]
    assert len(linears) == 4, [lay.op for lay in program.lowered.layers]
    previous, threads = torch.backends.quantized.engine, torch.get_num_threads()
    torch.backends.quantized.engine = engine
    torch.set_num_threads(1)
    try:
        for layer in linears:
            module = _torch_linear(layer)  # prepacks for the engine just set
            q = layer.params.quant
            for run in runs:
                codes = _three_d_input(program, run, layer)
                x = torch._make_per_tensor_quantized_tensor(
                    torch.from_numpy(codes), float(q.x_scale), int(q.x_zero_point)
                )
                got = module(x).int_repr().numpy()
                want = run.tensors[layer.output].codes
                assert got.shape == (*codes.shape[:2], layer.weight.shape[0])
                mismatches = np.count_nonzero(got.reshape(want.shape) != want)
                assert mismatches == 0, (
                    f"{layer.name} on engine {engine}: {mismatches} of {want.size} codes differ"
                )
    finally:
        torch.backends.quantized.engine = previous
        torch.set_num_threads(threads)


def _torch_mul_scalar(codes: np.ndarray, enc, c: float):
    x = torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), enc.scale, enc.zp)
    return torch.ops.quantized.mul(x, c)


def _assert_same_mul(y_torch, codes: np.ndarray, enc) -> None:
    assert np.array_equal(y_torch.int_repr().numpy(), codes)
    # PyTorch keeps |c|·s in binary64; every kernel downstream reads it as binary32.
    assert (float(np.float32(y_torch.q_scale())), y_torch.q_zero_point()) == (enc.scale, enc.zp)


def test_attention_scale_mul_equals_torch_quantized_mul(lowered_run):
    program, runs = lowered_run
    (layer,) = [lay for lay in program.lowered.layers if isinstance(lay, QMulScalarLayer)]
    for run in runs:
        x = run.tensors[layer.inputs[0]]
        y = _torch_mul_scalar(x.codes, x.encoding, layer.factor)
        _assert_same_mul(y, run.tensors[layer.output].codes, run.tensors[layer.output].encoding)


@pytest.mark.parametrize("c", [0.35355338, 1.75, -0.7, 0.0])
@pytest.mark.parametrize("scalar_first", [False, True])
def test_mul_by_scalar_equals_torch_quantized_mul(c, scalar_first):
    operands = ["c", "x"] if scalar_first else ["x", "c"]
    nodes = [helper.make_node("Mul", operands, ["y"], name="mul")]
    proto = model(nodes, {"x": ["N", 8, 16]}, ["y"], {"c": np.array(c, np.float32)})
    rng = np.random.default_rng(3)
    calib = rng.uniform(-1.5, 2.5, (6, 8, 16)).astype(np.float32)
    program = quantemu.compile(load_onnx(proto), backend="onednn", calib=calib, progress=False)
    (layer,) = program.lowered.layers
    assert isinstance(layer, QMulScalarLayer) and layer.exact
    run = program.run(rng.uniform(-2, 3, (2, 8, 16)).astype(np.float32), keep="all")
    x, y = run.tensors["x"], run.tensors["y"]
    _assert_same_mul(
        _torch_mul_scalar(x.codes, x.encoding, float(np.float32(c))), y.codes, y.encoding
    )


def test_mul_whose_scale_would_overflow_stays_a_float_fallback():
    nodes = [helper.make_node("Mul", ["x", "c"], ["y"], name="mul")]
    proto = model(nodes, {"x": ["N", 4]}, ["y"], {"c": np.array(3e38, np.float32)})
    ranges = {"x": TensorRange(-1e4, 1e4), "y": TensorRange(-1.0, 1.0)}
    (layer,) = lower(optimize(load_onnx(proto)), ranges).layers
    assert layer.op == "float:Mul" and not layer.exact


def test_mul_of_two_activations_is_quantized_mul():
    """PyTorch's ``quantized::mul`` of two activations (test_onednn_mobilenet_ops.py)."""
    nodes = [helper.make_node("Mul", ["x", "z"], ["y"], name="mul")]
    proto = model(nodes, {"x": ["N", 4], "z": ["N", 4]}, ["y"])
    calib = np.random.default_rng(0).standard_normal((2, 6, 4)).astype(np.float32)
    program = quantemu.compile(
        load_onnx(proto), backend="onednn", calib={"x": calib[0], "z": calib[1]}, progress=False
    )
    (layer,) = program.lowered.layers
    assert layer.op == "quantized::mul [aten]" and layer.exact
