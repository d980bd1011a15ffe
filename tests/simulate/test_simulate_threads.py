"""Whole-model results do not depend on how the integer primitives split their arrays."""

from __future__ import annotations

import numpy as np
import pytest
from tests.intmath.test_parallel import split

from quantemu.calibration.api import calibrate
from quantemu.graph import load_onnx, optimize
from quantemu.graph.zoo import resnet18
from quantemu.intmath import fixedpoint, floatconv, parallel, rounding, saturation
from quantemu.simulate import compile_model


@pytest.fixture(scope="module")
def resnet():
    graph = optimize(load_onnx(resnet18(size=32)))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    calib = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    return graph, calibrate(graph, calib, batch_size=1), x


# onednn's and nnie's layers, and xs3's xformer convolutions (their fused output transform),
# compute with their own NumPy kernels, not the chunked primitives; tflite2xcore's BSO
# operators and nvdla's do.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "options"), [("xs3", {"toolchain": "tflite2xcore"}), ("nvdla", {})]
)
def test_every_tensor_and_counter_is_the_same_at_any_split(resnet, backend, options, monkeypatch):
    """Tiny chunks over 3 threads split nearly every tensor of a ResNet-18: every layer's codes
    and counters must equal those of the single-threaded run."""
    graph, ranges, x = resnet
    program = compile_model(graph, backend, calibration=ranges, **options)
    one = program.run(x, keep="all")
    splits = []
    real = parallel.map_chunks

    def counting(kernel, out, *inputs):
        splits.append(parallel.chunk_count(out.size))
        return real(kernel, out, *inputs)

    for module in (rounding, saturation, fixedpoint, floatconv):
        monkeypatch.setattr(module, "map_chunks", counting)
    with split(threads=3, min_chunk=64):
        many = program.run(x, keep="all")
    assert splits and min(splits) > 1  # the run really went through split primitives
    assert one.tensors.keys() == many.tensors.keys()
    for name, tensor in one.tensors.items():
        assert np.array_equal(tensor.codes, many.tensors[name].codes), name
    assert one.counters == many.counters
