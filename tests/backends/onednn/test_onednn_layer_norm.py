"""LayerNormalization on onednn against PyTorch 2.13's ``quantized::layer_norm``, code for code.

The kernel (:mod:`quantemu.backends.onednn.layer_norm`) is compared with ``==`` to
``torch.ops.quantized.layer_norm`` on random rows of lengths inside and across the 32-code vector
blocks (over 100k rows), on exact and near ties of the two quantizers, and on rows that tell each
fused multiply-add from a separate multiply and add; the scalar reference checks the kernel; the
lowering and the zoo encoder block check that LayerNormalization becomes this exact layer.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnx import helper  # noqa: E402

import quantemu  # noqa: E402
from quantemu.backends.onednn import layer_norm as kernel  # noqa: E402
from quantemu.backends.onednn import reference  # noqa: E402
from quantemu.backends.onednn.layer_norm import quantized_layer_norm  # noqa: E402
from quantemu.backends.onednn.lower import lower  # noqa: E402
from quantemu.backends.onednn.lower.norm import QLayerNormLayer, torch_eps  # noqa: E402
from quantemu.calibration.ranges import TensorRange  # noqa: E402
from quantemu.graph import load_onnx, optimize  # noqa: E402
from tests.graph.onnx_models import model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F = np.float32
LENGTHS = (1, 2, 7, 8, 16, 31, 32, 33, 63, 64, 65, 100, 127, 768)
EPS = 1e-5


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def torch_layer_norm(q, xq, gamma, beta, yq, *, eps=EPS) -> np.ndarray:
    x = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), xq[0], xq[1])
    g, b = torch.from_numpy(np.asarray(gamma, F)), torch.from_numpy(np.asarray(beta, F))
    y = torch.ops.quantized.layer_norm(x, [q.shape[-1]], g, b, eps, yq[0], yq[1])
    return y.int_repr().numpy()


def ours(q, xq, gamma, beta, yq, *, eps=EPS) -> np.ndarray:
    return quantized_layer_norm(q, gamma, beta, x_qparams=xq, y_qparams=yq, eps=eps)[0]


def random_case(rng, rows: int, n: int):
    """Codes around a random centre and spread, random qparams, gamma and beta."""
    centre, spread = rng.uniform(0, 255), rng.choice([0.3, 2.0, 15.0, 60.0])
    q = np.clip(np.rint(rng.normal(centre, spread, (rows, n))), 0, 255).astype(np.uint8)
    xq = (float(F(rng.uniform(0.002, 0.2))), int(rng.integers(0, 256)))
    yq = (float(F(rng.uniform(0.002, 0.06))), int(rng.integers(0, 256)))
    gamma = rng.normal(1, 0.5, n).astype(F)
    beta = rng.normal(0, 0.5, n).astype(F)
    return q, xq, gamma, beta, yq


@pytest.mark.parametrize("n", LENGTHS)
def test_kernel_equals_torch_on_random_rows(n):
    rng = np.random.default_rng(n)
    rows = 0
    for _ in range(8):
        q, xq, gamma, beta, yq = random_case(rng, 1000, n)
        want = torch_layer_norm(q, xq, gamma, beta, yq)
        got = ours(q, xq, gamma, beta, yq)
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"N={n}: {len(bad)} codes differ, first at {bad[0].tolist()}"
        rows += q.shape[0]
    assert rows * len(LENGTHS) >= 100_000


@pytest.mark.parametrize("n", [7, 31, 32, 40, 64, 65])
def test_quantizers_of_body_and_tail_on_ties(n):
    """gamma = 0 makes v = beta exactly: put beta on (or one ulp off) a half-integer code."""
    rng = np.random.default_rng(100 + n)
    for t in range(60):
        q = rng.integers(0, 256, (20, n)).astype(np.uint8)
        ys = (
            float(F(2.0 ** -int(rng.integers(1, 8))))
            if t % 2
            else float(F(rng.uniform(0.002, 0.05)))
        )
        yq = (ys, int(rng.integers(0, 256)))
        beta = ((rng.integers(-120, 120, n) + 0.5) * ys).astype(F)
        if t % 3 == 0:
            beta = np.nextafter(beta, rng.choice([-1.0, 1.0], n) * np.inf).astype(F)
        args = (q, (0.05, 128), np.zeros(n, F), beta, yq)
        assert np.array_equal(ours(*args), torch_layer_norm(*args)), (n, t)


def test_each_fused_multiply_add_is_needed(monkeypatch):
    """On rows where ``fma`` and a separate multiply and add give other codes, torch agrees with
    the ``fma`` (variance, body and tail)."""
    rng = np.random.default_rng(5)
    told = 0
    for rep in range(12):
        n = (7, 33, 40, 64)[rep % 4]
        q, xq, gamma, beta, yq = random_case(rng, 20000, n)
        fused = ours(q, xq, gamma, beta, yq)
        with monkeypatch.context() as m:
            m.setattr(kernel, "fma_f32", lambda a, b, c: F(a) * F(b) + F(c))
            split = ours(q, xq, gamma, beta, yq)
        rows = (fused != split).any(axis=1)
        if rows.any():
            want = torch_layer_norm(q[rows], xq, gamma, beta, yq)
            assert np.array_equal(fused[rows], want)
            told += int(np.count_nonzero(split[rows] != want))
    assert told > 0


def test_scalar_reference_equals_kernel():
    rng = np.random.default_rng(11)
    for n in (1, 7, 32, 45, 70):
        q, xq, gamma, beta, yq = random_case(rng, 30, n)
        want = reference.layer_norm(q, gamma, beta, xq=xq, yq=yq, eps=EPS)
        assert ours(q, xq, gamma, beta, yq).tolist() == want, n


def test_torch_module_on_3d_input():
    rng = np.random.default_rng(2)
    q, xq, gamma, beta, yq = random_case(rng, 48, 96)
    q = q.reshape(3, 16, 96)
    weight, bias = (torch.nn.Parameter(torch.from_numpy(v)) for v in (gamma, beta))
    module = torch.ao.nn.quantized.LayerNorm(96, weight, bias, yq[0], yq[1], eps=EPS)
    x = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q), xq[0], xq[1])
    want = module(x).int_repr().numpy()
    assert np.array_equal(ours(q, xq, gamma, beta, yq, eps=torch_eps(float(F(EPS)))), want)


def test_kernel_under_avx2_capability():
    """The kernel is the AVX2 build on AVX-512 hosts too: an AVX2-capped torch agrees."""
    code = (
        "import numpy as np, torch\n"
        "from tests.backends.onednn.test_onednn_layer_norm import *\n"
        "if torch.backends.cpu.get_cpu_capability() != 'AVX2':\n"
        "    raise SystemExit(3)\n"
        "rng = np.random.default_rng(9)\n"
        "for n in (7, 32, 33, 100, 768):\n"
        "    c = random_case(rng, 500, n)\n"
        "    args = c\n"
        "    assert np.array_equal(ours(*args), torch_layer_norm(*args)), n\n"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode == 3:
        pytest.skip("this torch does not run its AVX2 kernels here")
    assert done.returncode == 0, done.stderr[-2000:]


def _ln_graph(axis: int = -1, beta_const: bool = True):
    n = 48
    rng = np.random.default_rng(4)
    inits = {"g": rng.normal(1, 0.3, n).astype(F)}
    inputs = {"x": ["N", 5, n]}
    if beta_const:
        inits["b"] = rng.normal(0, 0.3, n).astype(F)
    else:
        inputs["b"] = [n]
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, name="ln")
    return load_onnx(model([node], inputs, ["y"], inits, opset=17)), inits, rng


def test_lowered_layer_norm_is_exact_and_equals_torch():
    graph, inits, rng = _ln_graph()
    calib = rng.normal(0.5, 2, (4, 5, 48)).astype(F)
    program = quantemu.compile(graph, "onednn", calib=calib, progress=False)
    (layer,) = program.lowered.layers
    assert isinstance(layer, QLayerNormLayer) and layer.exact
    run = program.run(rng.normal(0.5, 2.5, (3, 5, 48)).astype(F), keep="all")
    x, y = run.tensors["x"], run.tensors["y"]
    xq, yq = (x.encoding.scale, x.encoding.zp), (y.encoding.scale, y.encoding.zp)
    assert np.array_equal(y.codes, torch_layer_norm(x.codes, xq, inits["g"], inits["b"], yq))


@pytest.mark.parametrize("form", [{"axis": 1}, {"beta_const": False}])
def test_other_forms_stay_float_fallbacks(form):
    graph, _, _ = _ln_graph(**form)
    ranges = {name: TensorRange(-3.0, 3.0) for name in ("x", "b", "y")}
    (layer,) = lower(optimize(graph), ranges).layers
    assert layer.op == "float:LayerNormalization" and not layer.exact


@pytest.fixture(scope="module", params=["torchscript", "dynamo"])
def encoder_run(request, tmp_path_factory):
    if request.param == "dynamo":
        pytest.importorskip("onnxscript")
    from tests.zoo.torch_models import ZOO, compiled_export

    folder = tmp_path_factory.mktemp("enc")
    program, rng = compiled_export("encoder", request.param, folder, "onednn", progress=False)
    x = rng.standard_normal((1, *ZOO["encoder"][1][1:])).astype(F)
    return program, program.run(x, keep="all")


def test_encoder_layer_norms_are_exact_and_equal_torch(encoder_run):
    program, run = encoder_run
    lns = [lay for lay in program.lowered.layers if isinstance(lay, QLayerNormLayer)]
    assert len(lns) == 2 and all(lay.exact for lay in lns)
    for layer in lns:
        x, y = run.tensors[layer.inputs[0]], run.tensors[layer.output]
        xq, yq = (x.encoding.scale, x.encoding.zp), (y.encoding.scale, y.encoding.zp)
        want = torch_layer_norm(x.codes, xq, layer.gamma, layer.beta, yq, eps=layer.eps)
        assert np.array_equal(y.codes, want), layer.name
