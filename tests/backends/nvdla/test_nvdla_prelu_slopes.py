"""PRelu's slope shapes as ONNX broadcasts them (from the right) on NVDLA's SDP BS PReLU.

Exporters write a per-channel slope as ``(C, 1, 1)`` (PyTorch) or ``(1, C, 1, 1)``; both are one
value per channel, the SDP's memory operand. A ``(C,)`` slope on a 4-D input runs along the
width (ONNX broadcasting), which the SDP cannot hold: refused, never read as per channel.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from tests.graph.onnx_models import model

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph import load_onnx

C = 3
SLOPES = np.array([0.25, 0.1, -0.5], np.float32)


def _prelu(slope: np.ndarray, shape=("N", C, 4, 5)):
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[1, 1]) if len(shape) == 4
        else helper.make_node("Relu", ["x"], ["m"]),
        helper.make_node("PRelu", ["m", "slope"], ["y"], name="prelu"),
    ]  # fmt: skip
    return load_onnx(model(nodes, {"x": list(shape)}, ["y"], {"slope": slope}))


def _run(graph, x, **options):
    prog = quantemu.compile(graph, backend="nvdla", calib=x, progress=False, **options)
    return prog, prog.run(x, keep="all")


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_leading_one_slope_is_the_per_channel_slope(precision):
    x = np.random.default_rng(7).normal(size=(2, C, 4, 5)).astype(np.float32)
    runs = {
        s: _run(_prelu(SLOPES.reshape(s)), x, precision=precision)
        for s in [(C, 1, 1), (1, C, 1, 1)]
    }
    (p1, r1), (p2, r2) = runs.values()
    assert [layer.op for layer in p1.lowered.layers] == [layer.op for layer in p2.lowered.layers]
    assert p1.lowered.layers[-1].op.endswith("prelu")
    y1, y2 = r1.tensors["y"], r2.tensors["y"]
    assert np.array_equal(np.asarray(y1.codes), np.asarray(y2.codes))


def test_int8_slope_codes_per_channel():
    """y = x where x >= 0, else x * slope[c] on the codes (the scale kept; <= half an LSB of
    the slopes' int16 rounding and the shared shift)."""
    x = np.random.default_rng(8).normal(size=(2, C, 4, 5)).astype(np.float32)
    _prog, r = _run(_prelu(SLOPES.reshape(1, C, 1, 1)), x)
    m, y = r.tensors["m"], r.tensors["y"]
    want = np.where(m.codes < 0, m.codes * SLOPES.reshape(1, C, 1, 1), m.codes)
    assert y.encoding == m.encoding
    assert np.max(np.abs(y.codes - want)) <= 0.5


def test_2d_input_takes_a_1d_slope_per_channel():
    x = np.random.default_rng(9).normal(size=(4, C)).astype(np.float32)
    _prog, r = _run(_prelu(SLOPES, shape=("N", C)), x)
    m, y = r.tensors["m"], r.tensors["y"]
    assert np.max(np.abs(y.codes - np.where(m.codes < 0, m.codes * SLOPES, m.codes))) <= 0.5


def test_a_slope_along_the_width_is_refused_naming_its_shape():
    slope = np.linspace(0.1, 0.5, 5, dtype=np.float32)  # (5,) on (N, 3, 4, 5): per column
    x = np.random.default_rng(10).normal(size=(2, C, 4, 5)).astype(np.float32)
    with pytest.raises(UnsupportedError, match=r"slope of shape \(5,\) .* other than the channels"):
        _run(_prelu(slope), x)
