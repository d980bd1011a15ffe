"""TRANSPOSE_CONV live: the stored single-op models
(``tests/backends/tflite/transpose_conv_peer_vectors.json``) on fresh int8 inputs through
LiteRT's reference kernels and TFLite-Micro, against the ``tflite`` kernel. XMOS's runtime
runs what xcore-opt rewrites the operator into (XC_conv2d_v2), which xs3 refuses
(``xs3/xformer/lower/refusals.py``); that it still differs is checked, so the refusal is
revisited when it stops differing. Each test skips without its peer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.tflite.params import FusedActivation, activation_range, conv_params
from quantemu.backends.tflite.transpose_conv import padding_before, transpose_conv2d
from tests.peers.runtimes import on_litert, on_tflite_micro, on_xmos

pytestmark = pytest.mark.peer

PATH = Path(__file__).resolve().parents[1] / "backends" / "tflite"
CASES = json.loads((PATH / "transpose_conv_peer_vectors.json").read_text())["cases"]


def _fresh(case: dict, index: int):
    """Fresh NHWC samples and the kernel's codes for them (NHWC)."""
    h, w, c_in = case["input_nhwc"]
    x = np.random.default_rng(500 + index).integers(-128, 128, (2, 1, h, w, c_in), dtype=np.int8)
    kh, kw = case["kernel"]
    filt = np.frombuffer(bytes.fromhex(case["filter_ohwi"]), np.int8)
    weights = filt.reshape(case["out_channels"], kh, kw, c_in).transpose(3, 0, 1, 2)
    (s_in, z_in), (s_out, z_out) = case["input"], case["output"]
    low, high = activation_range(FusedActivation[case["activation"]], np.float32(s_out), z_out)
    params = conv_params(s_in, z_in, case["weight_scales"], s_out, z_out)
    params = dataclasses.replace(params, act_min=low, act_max=high)
    size = tuple(case["output_hw"])
    pads = tuple(
        padding_before(case["padding"], k, s, o)
        for k, s, o in zip(case["kernel"], case["strides"], size, strict=True)
    )
    y, _ = transpose_conv2d(
        x[:, 0].transpose(0, 3, 1, 2), weights, np.array(case["bias"]), params,
        strides=tuple(case["strides"]), pads_before=pads, output_size=size,
    )  # fmt: skip
    return x, y.transpose(0, 2, 3, 1)[:, None]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_litert_and_tflite_micro(index):
    x, want = _fresh(CASES[index], index)
    blob = bytes.fromhex(CASES[index]["model"])
    np.testing.assert_array_equal(on_litert(blob, x), want)
    np.testing.assert_array_equal(on_tflite_micro(blob, x), want)


def test_xmos_runs_another_arithmetic(tmp_path):
    differ = 0
    for index, case in enumerate(CASES):
        x, want = _fresh(case, index)
        got = on_xmos(bytes.fromhex(case["model"]), x, tmp_path)
        differ += int(np.count_nonzero(got != want))
    assert differ > 0
