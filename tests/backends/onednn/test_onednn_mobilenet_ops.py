"""MobileNetV3's quantized ops on onednn against PyTorch 2.13, code for code.

``quantized::hardswish``, ``quantized::hardsigmoid`` (fixed ``(1/256, 0)``) and ``quantized::mul``
of two activations (:mod:`quantemu.backends.onednn.hard_ops`) are compared with ``==`` to
``torch.ops.quantized.*`` on random codes and qparams, shapes inside and across the 64-code
vector blocks, both memory orders, on qparams whose vector body and scalar tail disagree (which
pins the block size), on the mul's exact ties, and on the zoo's MobileNetV3 as both exporters
write it; the scalar references check the kernels.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from quantemu.backends.onednn import hard_ops, reference  # noqa: E402
from quantemu.backends.onednn.hard_ops import (  # noqa: E402
    HARDSIGMOID_QPARAMS,
    quantized_hardsigmoid,
    quantized_hardswish,
    quantized_mul,
)
from quantemu.backends.onednn.lower.hard import QHardLayer, QMulLayer  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

F = np.float32
# Element counts inside and across the 32- and 64-code blocks.
SHAPES = [(1, 1, 1, 7), (1, 2, 4, 4), (1, 3, 5, 5), (1, 4, 4, 4), (2, 8, 3, 3), (1, 7, 9, 11)]
SHAPES += [(1, 16, 4, 2), (1, 33, 2, 1), (3, 20, 4, 4), (1, 120, 4, 4), (65,), (5, 100)]


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def qtensor(q: np.ndarray, qp, channels_last: bool):
    t = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q.copy()), qp[0], qp[1])
    return t.contiguous(memory_format=torch.channels_last) if channels_last else t


def codes(t) -> np.ndarray:
    return t.int_repr().contiguous().numpy()


def random_qparams(rng, lo=-3.0, hi=-0.3) -> tuple[float, int]:
    return float(F(10 ** rng.uniform(lo, hi))), int(rng.integers(0, 256))


def torch_hard(q, xq, yq, *, swish: bool, channels_last: bool) -> np.ndarray:
    x = qtensor(q, xq, channels_last)
    if swish:
        return codes(torch.ops.quantized.hardswish(x, yq[0], yq[1]))
    y = torch.nn.functional.hardsigmoid(x)
    assert (y.q_scale(), y.q_zero_point()) == HARDSIGMOID_QPARAMS
    return codes(y)


def ours_hard(q, xq, yq, *, swish: bool, channels_last: bool) -> np.ndarray:
    cl = {"channels_last": channels_last}
    if swish:
        return quantized_hardswish(q, x_qparams=xq, y_qparams=yq, **cl)[0]
    return quantized_hardsigmoid(q, x_qparams=xq, **cl)[0]


@pytest.mark.parametrize("swish", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_hard_activations_equal_torch_on_random_tensors(shape, swish):
    rng = np.random.default_rng(len(shape) * 1000 + int(np.prod(shape)) + swish)
    for i in range(30):
        q = rng.integers(0, 256, shape).astype(np.uint8)
        xq, yq = random_qparams(rng, -3, 0), random_qparams(rng)
        cl = len(shape) == 4 and i % 2 == 0
        want = torch_hard(q, xq, yq, swish=swish, channels_last=cl)
        assert np.array_equal(ours_hard(q, xq, yq, swish=swish, channels_last=cl), want)


def disagreeing_cases(swish: bool, count: int = 12):
    """Qparams whose vector body and scalar tail give different codes, with those codes."""
    rng, found = np.random.default_rng(5 + swish), []
    fn = hard_ops._hardswish_f32 if swish else hard_ops._hardsigmoid_f32
    while len(found) < count:
        xq = random_qparams(rng, -3, 0)
        yq = random_qparams(rng) if swish else HARDSIGMOID_QPARAMS
        inv = F(1.0 / float(F(yq[0])))
        vector, scalar = (fn(t) for t in hard_ops._dequant_tables(*xq))
        body = np.clip(np.rint(vector * inv) + yq[1], 0, 255)
        tail = np.clip(np.rint(F(yq[1]) + scalar * inv), 0, 255)
        differ = np.nonzero(body != tail)[0]
        if differ.size:
            found.append((xq, yq, differ))
    return found


def _mismatches(cases, rng, swish: bool) -> int:
    bad = 0
    for xq, yq, differ in cases:
        for shape in ((1, 7, 9, 11), (1, 3, 5, 5), (2, 3, 40, 1), (1, 64, 1, 1), (200,)):
            q = rng.choice(differ, size=shape).astype(np.uint8)
            for cl in {False, len(shape) == 4}:
                want = torch_hard(q, xq, yq, swish=swish, channels_last=cl)
                bad += int(
                    np.count_nonzero(ours_hard(q, xq, yq, swish=swish, channels_last=cl) != want)
                )
    return bad


@pytest.mark.parametrize("swish", [True, False])
def test_vector_body_and_scalar_tail_on_codes_where_they_disagree(swish, monkeypatch):
    cases = disagreeing_cases(swish)
    assert _mismatches(cases, np.random.default_rng(1), swish) == 0
    # The block size matters on these tensors: a block of one 32-code vector would not do.
    monkeypatch.setattr(hard_ops, "VECTOR_CODES", 32)
    assert _mismatches(cases, np.random.default_rng(1), swish) > 0


@pytest.mark.parametrize("swish", [True, False])
def test_two_threads_move_the_tails(swish):
    rng = np.random.default_rng(3)
    (xq, yq, differ), *_ = disagreeing_cases(swish, 1)
    q = rng.choice(differ, size=(1, 24, 40, 40)).astype(np.uint8)  # 38400 codes: two ranges
    torch.set_num_threads(2)
    if torch.get_num_threads() != 2:
        pytest.skip("torch cannot run two threads here")
    want = torch_hard(q, xq, yq, swish=swish, channels_last=True)
    kw = {"x_qparams": xq, "threads": 2}
    got = (
        quantized_hardswish(q, y_qparams=yq, **kw)[0]
        if swish
        else quantized_hardsigmoid(q, **kw)[0]
    )
    assert np.array_equal(got, want)


def test_hard_activations_under_avx2_capability():
    """The kernels are the AVX2 build on AVX-512 hosts too: an AVX2-capped torch agrees."""
    code = (
        "import numpy as np, torch\n"
        "from tests.backends.onednn.test_onednn_mobilenet_ops import (\n"
        "    _mismatches, disagreeing_cases)\n"
        "if torch.backends.cpu.get_cpu_capability() != 'AVX2':\n"
        "    raise SystemExit(3)\n"
        "for swish in (True, False):\n"
        "    bad = _mismatches(disagreeing_cases(swish), np.random.default_rng(1), swish)\n"
        "    assert bad == 0, (swish, bad)\n"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True
    )
    if done.returncode == 3:
        pytest.skip("this torch does not run its AVX2 kernels here")
    assert done.returncode == 0, done.stderr[-2000:]


def torch_mul(a, b, aq, bq, yq, *, channels_last=False) -> np.ndarray:
    ta, tb = qtensor(a, aq, channels_last), qtensor(b, bq, channels_last and b.ndim == 4)
    return codes(torch.ops.quantized.mul(ta, tb, yq[0], yq[1]))


MUL_SHAPES = [
    ((1, 8, 16, 16), (1, 8, 1, 1)),
    ((3, 120, 4, 4), (3, 120, 1, 1)),
    ((2, 33, 3, 5), (2, 33, 1, 1)),
    ((1, 5, 7, 3), (1, 5, 7, 3)),
    ((4, 70), (1, 70)),
    ((65,), (65,)),
]


@pytest.mark.parametrize("engine", ["x86", "onednn"])
@pytest.mark.parametrize(("sa", "sb"), MUL_SHAPES)
def test_mul_equals_torch_on_random_tensors(sa, sb, engine):
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"engine {engine} not in this torch")
    before, torch.backends.quantized.engine = torch.backends.quantized.engine, engine
    try:
        rng = np.random.default_rng(int(np.prod(sa)) + len(sb))
        for i in range(25):
            a = rng.integers(0, 256, sa).astype(np.uint8)
            b = rng.integers(0, 256, sb).astype(np.uint8)
            aq, bq, yq = random_qparams(rng), random_qparams(rng, -3, 0), random_qparams(rng)
            want = torch_mul(a, b, aq, bq, yq, channels_last=len(sa) == 4 and i % 2 == 0)
            got = quantized_mul(a, b, a_qparams=aq, b_qparams=bq, y_qparams=yq)[0]
            assert np.array_equal(got, want)
    finally:
        torch.backends.quantized.engine = before


def test_mul_on_exact_ties():
    """Scales whose multiplier puts many products exactly on .5: round half to even."""
    rng = np.random.default_rng(8)
    for aq, bq, yq in [((0.5, 3), (0.25, 128), (0.0625, 100)), ((0.125, 0), (0.5, 17), (0.125, 9))]:
        a = rng.integers(0, 256, (2, 16, 5, 5)).astype(np.uint8)
        b = rng.integers(0, 256, (2, 16, 1, 1)).astype(np.uint8)
        got = quantized_mul(a, b, a_qparams=aq, b_qparams=bq, y_qparams=yq)[0]
        assert np.array_equal(got, torch_mul(a, b, aq, bq, yq))


def test_scalar_references_equal_kernels():
    rng = np.random.default_rng(11)
    for n in (7, 64, 100, 191):
        q = rng.integers(0, 256, n).astype(np.uint8)
        xq, yq = random_qparams(rng, -3, 0), random_qparams(rng)
        for swish in (True, False):
            out = yq if swish else HARDSIGMOID_QPARAMS
            ref = reference.hard_activation(q.tolist(), xq=xq, yq=out, swish=swish)
            assert ours_hard(q, xq, yq, swish=swish, channels_last=False).tolist() == ref
        b = rng.integers(0, 256, n).astype(np.uint8)
        bq = random_qparams(rng)
        got = quantized_mul(q, b, a_qparams=xq, b_qparams=bq, y_qparams=yq)[0]
        assert got.tolist() == reference.quantized_mul(q.tolist(), b.tolist(), aq=xq, bq=bq, yq=yq)


def test_fx_x86_flow_quantizes_these_ops():
    """PyTorch's FX flow: Hardswish -> quantized hardswish, Hardsigmoid -> fixed (1/256, 0),
    the gate product -> quantized::mul."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 1)
            self.act, self.gate = torch.nn.Hardswish(), torch.nn.Hardsigmoid()

        def forward(self, x):
            y = self.act(self.conv(x))
            return y * self.gate(self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1)))

    x = torch.randn(2, 3, 12, 12)
    prepared = prepare_fx(Block().eval(), get_default_qconfig_mapping("x86"), (x,))
    prepared(x)
    converted = convert_fx(prepared)
    assert (
        type(converted.act).__name__ == "Hardswish"
        and "quantized" in type(converted.act).__module__
    )
    assert "torch.ops.quantized.mul(" in converted.code
    gate = converted.gate(
        torch.quantize_per_tensor(torch.randn(2, 8, 1, 1), 0.05, 128, torch.quint8)
    )
    assert (gate.q_scale(), gate.q_zero_point()) == HARDSIGMOID_QPARAMS


@pytest.fixture(scope="module", params=["torchscript", "dynamo"])
def mobilenet_run(request, tmp_path_factory):
    if request.param == "dynamo":
        pytest.importorskip("onnxscript")
    from tests.zoo.torch_models import ZOO, compiled_export

    folder = tmp_path_factory.mktemp("mnv3")
    name = "mobilenet_v3_small"
    program, rng = compiled_export(name, request.param, folder, "onednn", progress=False)
    shape = ZOO[name][1][1:]
    return program, program.run(rng.standard_normal((2, *shape)).astype(F), keep="all")


def _qp(t) -> tuple[float, int]:
    return t.encoding.scale, t.encoding.zp


def test_mobilenet_v3_ops_are_exact_and_equal_torch(mobilenet_run):
    program, run = mobilenet_run
    layers = program.lowered.layers
    assert all(layer.exact for layer in layers), [lay.op for lay in layers if not lay.exact]
    hard = [lay for lay in layers if isinstance(lay, QHardLayer)]
    muls = [lay for lay in layers if isinstance(lay, QMulLayer)]
    assert len(hard) == 12 and len(muls) == 4
    for layer in hard:
        x, y = run.tensors[layer.inputs[0]], run.tensors[layer.output]
        want = torch_hard(x.codes, _qp(x), _qp(y), swish=layer.swish, channels_last=True)
        assert np.array_equal(y.codes, want), layer.name
    for layer in muls:
        (a, b), y = (run.tensors[i] for i in layer.inputs), run.tensors[layer.output]
        want = torch_mul(a.codes, b.codes, _qp(a), _qp(b), _qp(y), channels_last=True)
        assert np.array_equal(y.codes, want), layer.name
