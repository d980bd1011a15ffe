"""quantemu.torch: the QAT forward pass is the backend's exact program for the current weights,
element for element (``==``); the backward pass reaches every weight (clipped STE)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import quantemu  # noqa: E402 (after the skip: the module needs torch)
import quantemu.torch as qt  # noqa: E402
from quantemu.data import demo_dataset, demo_model_path  # noqa: E402
from quantemu.errors import InvalidInputError, UnsupportedError  # noqa: E402
from quantemu.graph.zoo import resnet18  # noqa: E402
from quantemu.torch.ste import straight_through as _straight_through  # noqa: E402

VARIANTS = [
    ("xs3", {}),
    ("xs3", {"toolchain": "tflite2xcore"}),
    ("nvdla", {}),
    ("onednn", {}),
    ("onednn", {"isa": "avx2"}),
    ("onednn", {"isa": "avx512_core"}),
    ("nnie", {}),
    ("tflite", {}),
]


@pytest.fixture(scope="module")
def resnet():
    """A model none of quantemu.torch was written against: a narrow ResNet-18 (residual Adds,
    max and global pooling, a Gemm), with random weights."""
    model = quantemu.load_onnx(resnet18(batch="N", size=32, width=8, num_classes=10))
    rng = np.random.default_rng(5)
    calib = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    x = rng.standard_normal((6, 3, 32, 32)).astype(np.float32)
    return model, calib, x


@pytest.mark.parametrize(("backend", "options"), VARIANTS)
def test_forward_is_the_compiled_program_and_backward_reaches_every_weight(
    resnet, backend, options, tmp_path
):
    model, calib, x = resnet
    want = quantemu.compile(model, backend, calib=calib, **options).run(x)
    (out_name,) = model.outputs
    qat = qt.prepare(model, backend, calib, **options)
    qat.eval()
    with torch.no_grad():
        got = qat(torch.from_numpy(x))
    assert np.array_equal(got.numpy(), want.outputs[out_name])
    qat.train()
    got = qat(torch.from_numpy(x))
    assert np.array_equal(got.detach().numpy(), want.outputs[out_name])
    assert qat.counters == {k: dict(v) for k, v in want.counters.items()}
    torch.nn.functional.cross_entropy(got, torch.arange(6) % 10).backward()
    assert qat.weight_names and len(qat.weight_names) == len(list(qat.parameters()))
    for name in qat.weight_names:
        grad = qat.weight(name).grad
        assert grad is not None and torch.count_nonzero(grad) > 0, name
    torch.optim.SGD(qat.parameters(), lr=0.01).step()
    qat.eval()
    with torch.no_grad():
        trained = qat(torch.from_numpy(x)).numpy()
    qat.export(tmp_path / "resnet.onnx")  # and the held-out model's export round-trips
    again = quantemu.compile(str(tmp_path / "resnet.onnx"), backend, **options).run(x)
    assert np.array_equal(again.outputs[out_name], trained)


@pytest.mark.parametrize("backend", ["xs3", "nvdla", "onednn", "nnie", "tflite"])
def test_an_optimizer_step_rederives_the_integer_parameters(backend):
    """The program is lowered again after the weights change (and only then), and runs what
    quantemu.compile makes of the new weights."""
    calib = demo_dataset("calib")[0]
    x, labels = demo_dataset("test")
    qat = qt.prepare(demo_model_path(), backend, calib)
    first = qat.program
    assert qat.program is first  # unchanged weights: not lowered again
    before = qat(torch.from_numpy(x[:32]))
    loss = torch.nn.functional.cross_entropy(before, torch.from_numpy(labels[:32]).long())
    loss.backward()
    torch.optim.SGD(qat.parameters(), lr=0.5).step()
    second = qat.program
    assert second is not first
    layer = first.lowered.layers[0].output
    codes = [p.run(x[:32], keep="all").tensors[layer].codes for p in (first, second)]
    assert not np.array_equal(*codes)  # the first layer's integer weights changed
    # the new program is exactly what compile makes of the trained weights, with the same ranges
    weights = {n: qat.weight(n).detach().numpy() for n in qat.weight_names}
    graph = dataclasses.replace(qat.graph, initializers={**qat.graph.initializers, **weights})
    again = quantemu.compile(graph, backend, calibration=qat.ranges).run(x)
    with torch.no_grad():
        assert np.array_equal(qat(torch.from_numpy(x)).numpy(), again.outputs["logits"])


def test_straight_through_clips_the_gradient_at_the_range_edges():
    """Forward: the exact values. Backward: 1 inside [low, high], edges included, 0 outside."""

    class Range:
        min, max, axis = -1.0, 2.0, None

    twin = torch.tensor([-1.5, -1.0, 0.3, 2.0, 2.0001, 7.0], requires_grad=True)
    exact = torch.tensor([-1.0, -1.0, 0.25, 2.0, 2.0, 2.0])
    out = _straight_through(twin, exact, Range)
    assert torch.equal(out.detach(), exact)
    out.sum().backward()
    assert twin.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]


def test_straight_through_per_channel_ranges():
    class Range:
        min, max, axis = np.array([0.0, -5.0]), np.array([1.0, 5.0]), 1

    twin = torch.tensor([[[3.0], [3.0]]], requires_grad=True)  # (1, 2, 1): channel 0 clips
    _straight_through(twin, torch.zeros(1, 2, 1), Range).sum().backward()
    assert twin.grad.flatten().tolist() == [0.0, 1.0]


def test_bad_models_are_refused_with_the_remedy():
    calib = demo_dataset("calib")[0]
    with pytest.raises(InvalidInputError, match=r"example input: pass example="):
        qt.prepare(torch.nn.Linear(2, 2), "xs3", "calib.npy")
    with pytest.raises(InvalidInputError, match=r"unknown|backend"):
        qt.prepare(demo_model_path(), "no_such_backend", calib)
    qat = qt.prepare(demo_model_path(), "nvdla", calib)
    with pytest.raises(InvalidInputError, match="not a trainable weight"):
        qat.weight("logits")


@pytest.mark.parametrize(("backend", "options"), VARIANTS)
def test_export_round_trips_exactly(tmp_path, backend, options):
    """After training steps, the exported file simulates to the module's eval outputs, with
    and without calibration data (the ranges it carries win)."""
    calib = demo_dataset("calib")[0]
    x, labels = demo_dataset("test")
    qat = qt.prepare(demo_model_path(), backend, calib, **options)
    opt = torch.optim.SGD(qat.parameters(), lr=0.05)
    for start in range(0, 192, 64):
        out = qat(torch.from_numpy(x[start : start + 64]))
        loss = torch.nn.functional.cross_entropy(
            out, torch.from_numpy(labels[start : start + 64]).long()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    qat.eval()
    with torch.no_grad():
        want = qat(torch.from_numpy(x)).numpy()
    path = tmp_path / "trained.onnx"
    qat.export(path)
    for calib_data in (None, calib[:16]):
        program = quantemu.compile(str(path), backend, calib=calib_data, **options)
        assert np.array_equal(program.run(x).outputs["logits"], want)
        assert "ranges carried in the model file" in program.header["calibration"]


def test_quantemu_run_takes_the_exported_model_without_calibration(tmp_path):
    from quantemu.cli import main

    x, labels = demo_dataset("test")
    qat = qt.prepare(demo_model_path(), "onednn", demo_dataset("calib")[0], isa="avx2")
    qat.export(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    code = main(["run", str(tmp_path / "m.onnx"), "--backend", "onednn", "--option",
                 "isa=avx2", "--eval", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "y.npy"), "--json", str(tmp_path / "r.json"), "-q"])  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    with torch.no_grad():
        qat.eval()
        want = float((qat(torch.from_numpy(x)).argmax(1).numpy() == labels).mean())
    (evaluation,) = report["evaluations"]
    assert evaluation["backend_accuracy"] == want
    assert "ranges carried in the model file" in evaluation["header"]["calibration"]


def test_a_torch_module_is_exported_and_trained_exactly():
    """A torch.nn.Module (exported in eval mode, its weights copied): the QAT model's outputs
    equal quantemu.compile of the same export, and training it leaves the module untouched."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    ).train()
    calib = demo_dataset("calib")[0]
    x = demo_dataset("test")[0][:40]
    qat = qt.prepare(module, "nvdla", calib)
    assert module.training  # its mode is restored
    want = quantemu.compile(qat.graph, "nvdla", calibration=qat.ranges).run(x).outputs
    with torch.no_grad():
        assert np.array_equal(qat(torch.from_numpy(x)).numpy(), want[qat.graph.outputs[0]])
    before = module[0].weight.detach().clone()
    qat(torch.from_numpy(x)).sum().backward()
    torch.optim.SGD(qat.parameters(), lr=0.1).step()
    assert torch.equal(module[0].weight, before)


def test_log_grid_gradient_follows_the_levels():
    """NNIE's grid: the gradient is level / x (here 1.0 / 0.9 and 2.0 / 2.2); zero where the
    value fell to zero."""
    twin = torch.tensor([0.9, 2.2, 1e-6], requires_grad=True)
    exact = torch.tensor([1.0, 2.0, 0.0])
    _straight_through(twin, exact, None, logarithmic=True).sum().backward()
    assert twin.grad.tolist() == pytest.approx([1.0 / 0.9, 2.0 / 2.2, 0.0], rel=1e-6)


def test_an_operator_without_a_differentiable_kernel_is_named():
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Erf", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    calib = np.random.default_rng(0).random((8, 4), np.float32)
    with pytest.raises(UnsupportedError, match=r"without a differentiable kernel yet: Erf"):
        qt.prepare(quantemu.load_onnx(model), "onednn", calib)


@pytest.mark.parametrize("backend", ["xs3", "nvdla", "onednn", "nnie", "tflite"])
def test_learned_ranges_are_lowered_trained_and_exported_exactly(tmp_path, backend):
    """ranges="learned": the ranges get gradients, an optimizer step moves them, the program is
    lowered from the moved ranges (== compile with them), and export carries them."""
    calib = demo_dataset("calib")[0]
    x, labels = demo_dataset("test")
    qat = qt.prepare(demo_model_path(), backend, calib, ranges="learned")
    assert qat.ranges.tensors == qat.calibrated.tensors  # they start at the calibrated ones
    out = qat(torch.from_numpy(x[:64]))
    torch.nn.functional.cross_entropy(out, torch.from_numpy(labels[:64]).long()).backward()
    grad = qat.learned.bounds.grad
    assert grad is not None and torch.count_nonzero(grad) > 0
    torch.optim.SGD(qat.parameters(), lr=0.05).step()
    moved = qat.ranges
    assert moved.tensors != qat.calibrated.tensors
    graph = qat.trained_graph()
    want = quantemu.compile(graph, backend, calibration=moved).run(x).outputs["logits"]
    qat.eval()
    with torch.no_grad():
        got = qat(torch.from_numpy(x)).numpy()
    assert np.array_equal(got, want)
    qat.export(tmp_path / "learned.onnx")
    again = quantemu.compile(str(tmp_path / "learned.onnx"), backend).run(x).outputs["logits"]
    assert np.array_equal(again, got)


def test_lsq_range_gradient_at_the_edges():
    """Inside [low, high] the rounding error over the width; a clipped value follows its end
    (1); all scaled by 1 / sqrt(elements * 255)."""
    low, high = torch.tensor(0.0, requires_grad=True), torch.tensor(4.0, requires_grad=True)

    class Range:
        min, max, axis = 0.0, 4.0, None

    twin = torch.tensor([-1.0, 1.2, 3.9, 5.0])
    exact = torch.tensor([0.0, 1.0, 4.0, 4.0])
    out = _straight_through(twin, exact, Range, learned=(low, high))
    assert torch.equal(out.detach(), exact)
    out.sum().backward()
    scale = 1 / (4 * 255) ** 0.5
    inside = (1.0 - 1.2) / 4 + (4.0 - 3.9) / 4  # (y - x) / (high - low) over the inside values
    assert high.grad.item() == pytest.approx((inside + 1) * scale)  # + the value above
    assert low.grad.item() == pytest.approx((-inside + 1) * scale)  # + the value below


def test_bad_ranges_mode():
    with pytest.raises(InvalidInputError, match=r"ranges = 'lsq'; choose 'observed'"):
        qt.prepare(demo_model_path(), "nvdla", demo_dataset("calib")[0], ranges="lsq")


@pytest.mark.parametrize(
    ("backend", "linear"), [("nvdla", True), ("tflite", True), ("nnie", False)]
)
def test_export_writes_qdq_for_linear_schemes_that_other_tools_run(tmp_path, backend, linear):
    """Linear schemes: a Q/DQ pair per per-tensor 8-bit tensor, with the program's own scale
    (float32) and zero point, which onnxruntime runs; NNIE's log codes: the property only."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    x = demo_dataset("test")[0]
    qat = qt.prepare(demo_model_path(), backend, demo_dataset("calib")[0])
    qat.eval()
    qat.export(tmp_path / "q.onnx")
    model = onnx.load(str(tmp_path / "q.onnx"))
    quantize = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    if not linear:
        assert not quantize
        return
    stored = qat.program.run(x[:1], keep="all").tensors
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert len(quantize) == len(stored) - 1  # every tensor but the graph output
    for node in quantize:
        enc = stored[node.input[0]].encoding
        assert consts[node.input[1]] == np.float32(enc.scale)
        assert int(consts[node.input[2]]) == int(enc.zero_point)
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {session.get_inputs()[0].name: x})[0]
    with torch.no_grad():
        ours = qat(torch.from_numpy(x)).numpy()
    # onnxruntime computes its own arithmetic: top-1, not codes, is what the two share
    assert np.mean(theirs.argmax(1) == ours.argmax(1)) >= 0.98


def test_a_floating_point_pipeline_is_refused():
    # nvdla precision=fp16 has no quantization grid and no ranges: nothing to train against
    with pytest.raises(UnsupportedError, match="precision='int8'"):
        qt.prepare(str(demo_model_path()), "nvdla", None, precision="fp16")
