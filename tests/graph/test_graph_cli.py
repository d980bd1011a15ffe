"""``quantemu inspect``: the demo model, a ResNet-18-shaped model, passes, dumps, errors."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest

from quantemu.cli import main
from quantemu.graph.zoo import resnet18


def test_inspect_demo(capsys):
    assert main(["inspect", "demo"]) == 0
    out = capsys.readouterr().out
    for text in (
        "/depthwise/Conv",
        "MaxPool",
        "AveragePool",
        "Gemm",
        "batchx16x8x8",
        "6,522",
        "13 nodes",
        "MACs are per sample",
    ):
        assert text in out


@pytest.fixture(scope="module")
def resnet18_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "resnet18.onnx"
    onnx.save(resnet18(batch="N"), path)
    return path


@pytest.mark.slow
def test_inspect_resnet18_shaped_model(resnet18_file, capsys):
    assert main(["inspect", str(resnet18_file), "--batch", "1"]) == 0
    out = capsys.readouterr().out
    for text in (
        "resnet18",
        "1x64x112x112",
        "1x64x56x56",
        "1x512x7x7",
        "1x1000",
        "69 nodes",
        "layer4.1.conv2",
        "512x512x3x3",
    ):
        assert text in out, text
    # torchvision's 11,689,512 parameters plus the BN running means and variances (2 x 4,800
    # channels), and its 1.81 GMACs per sample.
    assert "11,699,112" in out and "1,814,073,344" in out


@pytest.mark.slow
def test_inspect_optimize_and_dumps(resnet18_file, capsys):
    assert main(["inspect", str(resnet18_file), "-O"]) == 0
    out = capsys.readouterr().out
    assert "after the default pipeline" in out and "Conv+relu" in out and "Add+relu" in out
    assert "32 nodes" in out and "BatchNormalization" not in out
    assert main(["inspect", "demo", "--dump-after", "fold_batchnorm"]) == 0
    assert capsys.readouterr().out.count("after pass") == 1
    assert main(["inspect", "demo", "--dump-passes"]) == 0
    out = capsys.readouterr().out
    assert [line.strip("─ ") for line in out.splitlines() if "after pass" in line] == [
        "after pass relax_batch",
        "after pass remove_identity",
        "after pass fold_constants",
        "after pass reduce_mean_to_pool",
        "after pass fuse_matmul_add",
        "after pass div_by_constant",
        "after pass fuse_hard_swish",
        "after pass sink_squeeze",
        "after pass fold_batchnorm",
        "after pass fuse_activation",
    ]


def test_list_passes(capsys):
    assert main(["inspect", "--passes"]) == 0
    out = capsys.readouterr().out
    assert "fold_batchnorm" in out and "fuse_activation" in out and "default pipeline" in out


def test_usage_errors(capsys):
    assert main(["inspect"]) == 2
    assert "MODEL is required" in capsys.readouterr().err
    assert main(["inspect", "demo", "--dump-after", "nope"]) == 2
    assert "unknown pass nope" in capsys.readouterr().err


def test_bad_model_is_a_message_not_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quantemu inspect: error: ") and "Traceback" not in err


def test_entry_point_inspect_demo():
    out = subprocess.run(
        [sys.executable, "-m", "quantemu", "inspect", "demo"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "/stem/Conv" in out.stdout


def test_lint_nnie_lists_findings_with_advice(capsys):
    # The demo's pools use ceil_mode=0 but their sizes agree with ceil mode (warnings), and
    # its depthwise conv is discouraged (warning): no error, exit 0.
    assert main(["inspect", "demo", "--lint", "nnie"]) == 0
    out = capsys.readouterr().out
    assert "nnie model constraints" in out
    for text in ("/depthwise/Conv", "depthwise_conv", "pool_ceil_mode", "ceil_mode=1"):
        assert text in out


@pytest.mark.slow
def test_lint_nnie_error_exits_1(resnet18_file, capsys):
    # ResNet-18's stem max pool (3x3, stride 2, pad 1 on 112x112) gives 56x56 with floor mode
    # and 57x57 with NNIE's ceil mode: the shapes differ, so the finding is an error.
    assert main(["inspect", str(resnet18_file), "--lint", "nnie"]) == 1
    out = capsys.readouterr().out
    assert "pool_ceil_mode" in out and "error" in out


def test_lint_unknown_target_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", "demo", "--lint", "tpu"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
