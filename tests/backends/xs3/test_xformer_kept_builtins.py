"""The convolutions xcore-opt 1.4.2 keeps as TFLite builtins (issue 30): the xs3 backend on
the one-operator models of tests/data/xformer_kept (tools/make_xformer_kept_builtins.py), both
as int8 models (the xcore-opt emulation) and as xcore-opt compiled them, against XMOS's host
interpreter's outputs (``y_xcore``); live against xcore-opt and the interpreter when
xmos-ai-tools is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph.tflite_import import nhwc_view

DATA = Path(__file__).resolve().parents[2] / "data" / "xformer_kept"
CASES = json.loads((DATA / "MANIFEST.json").read_text())["cases"]
RUNS = [n for n, c in CASES.items() if c["expected"] in ("kept", "compiled")]
RUNS = [n for n in RUNS if n != "conv_grouped"]  # the TFLite importer has no grouped CONV_2D
KEPT = [n for n in RUNS if CASES[n]["expected"] == "kept"]


def _run(path: Path, x: np.ndarray):
    program = quantemu.compile(path, "xs3")
    out = program.graph.outputs[0]
    codes = program.run(x, keep="all").tensors[out].codes
    return program, nhwc_view(program.graph, out, codes)


@pytest.mark.parametrize("form", ["int8", "xcore"])
@pytest.mark.parametrize("name", RUNS)
def test_outputs_equal_xmos_host_interpreter(name, form):
    data = np.load(DATA / f"{name}.npz")
    program, y = _run(DATA / f"{name}.{form}.tflite", data["x_int8"])
    assert np.array_equal(y.reshape(data["y_xcore"].shape), data["y_xcore"])
    assert all(layer.exact for layer in program.lowered.layers)


@pytest.mark.parametrize("name", KEPT)
def test_kept_convolutions_run_tflite_micro_kernels(name):
    """No XC_conv2d_v2 where xcore-opt keeps the builtin, and the layer says why."""
    data = np.load(DATA / f"{name}.npz")
    program, _ = _run(DATA / f"{name}.int8.tflite", data["x_int8"])
    convs = [layer for layer in program.lowered.layers if "CONV_2D" in layer.op]
    assert convs and all(not layer.op.startswith("XC_") for layer in convs)
    assert all("xcore-opt keeps it" in layer.note for layer in convs)
    assert "DEPTHWISE_CONV_2D" in CASES[name]["xcore_ops"]


def test_kept_depthwise_differs_from_xc_conv2d_v2():
    """The case the issue found: run as XC_conv2d_v2 the codes would differ."""
    data = np.load(DATA / "dw_c1_dm8.npz")
    assert np.array_equal(data["y_xcore"], data["y_tflite_ref"])


@pytest.mark.parametrize("form", ["int8", "xcore"])
def test_miscompiled_depth_multiplier_is_refused(form):
    """Depth multiplier 2 on 4 channels: xcore-opt builds an XC_conv2d_v2 whose outputs are
    unrelated to the convolution; quantemu refuses it, naming why."""
    data = np.load(DATA / "dw_c4_dm2.npz")
    assert np.abs(data["y_xcore"].astype(int) - data["y_tflite_ref"]).max() > 100
    with pytest.raises(UnsupportedError, match="depth multiplier"):
        quantemu.compile(DATA / f"dw_c4_dm2.{form}.tflite", "xs3")


def test_depthwise_without_bias_is_refused_as_xcore_opt_aborts():
    assert "DeallocateTempTfLiteTensor" in CASES["dw_c8_no_bias"]["xcore_opt_stderr"]
    with pytest.raises(UnsupportedError, match="without a bias"):
        quantemu.compile(DATA / "dw_c8_no_bias.int8.tflite", "xs3")


def test_grouped_conv_is_kept_and_unsupported_by_the_importer():
    assert CASES["conv_grouped"]["xcore_ops"] == ["CONV_2D"]
    with pytest.raises(UnsupportedError, match="grouped convolution"):
        quantemu.compile(DATA / "conv_grouped.int8.tflite", "xs3")


# ---------------------------------------------------------------- live


def _xmos():
    if shutil.which("xcore-opt", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("xcore-opt (xmos-ai-tools 1.4.2) is not installed")
    return pytest.importorskip("xmos_ai_tools.xinterpreters")


def _live_ops(tmp_path: Path, name: str) -> list[str]:
    exe = str(Path(sys.executable).parent / "xcore-opt")
    out = tmp_path / f"{name}.xcore.tflite"
    subprocess.run([exe, "-o", str(out), str(DATA / f"{name}.int8.tflite")], check=True,
                   capture_output=True)  # fmt: skip
    from quantemu.graph.tflite_reader import read_tflite

    return [op.custom_code or op.name for op in read_tflite(out).operators], out


@pytest.mark.parametrize("name", [*RUNS, "dw_c4_dm2"])
def test_live_xcore_opt_and_interpreter(name, tmp_path):
    """xcore-opt compiles the committed int8 model to the same operators, and XMOS's
    interpreter on that build gives the committed outputs, which quantemu's equal above."""
    interpreters = _xmos()
    ops, out = _live_ops(tmp_path, name)
    assert ops == CASES[name]["xcore_ops"]
    data = np.load(DATA / f"{name}.npz")
    it = interpreters.TFLMHostInterpreter()
    it.set_model(model_content=out.read_bytes())
    got = []
    for xi in data["x_int8"]:
        it.set_tensor(0, xi[None])
        it.invoke()
        got.append(it.get_tensor(it.get_output_details()[0]["index"])[0].copy())
    it.close()
    assert np.array_equal(np.stack(got), data["y_xcore"])
