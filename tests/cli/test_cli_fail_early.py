"""Issue 16: bad paths, files and numbers fail before the work; flags and names agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from quantemu.cli import main


def _quantemu(*args: str, cwd=None, columns: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "quantemu.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("--json", "does not exist"),
        ("--report", "does not exist"),
        ("--save-outputs", "does not exist"),
    ],
)
def test_bad_output_path_fails_before_calibration(tmp_path, capsys, option, words):
    start = time.perf_counter()
    code = main(["run", "demo", "--backend", "xs3", "-q", option, str(tmp_path / "no/x.out")])
    assert time.perf_counter() - start < 1.0
    assert code == 2
    err = capsys.readouterr().err
    assert option in err and words in err and "mkdir -p" in err


def test_output_path_that_is_a_directory(tmp_path, capsys):
    assert main(["run", "demo", "--backend", "xs3", "-q", "--json", str(tmp_path)]) == 2
    assert "it is a directory" in capsys.readouterr().err


def test_demo_report_onto_a_file(tmp_path, capsys):
    target = tmp_path / "report"
    target.write_text("x")
    assert main(["demo", "-q", "--report", str(target)]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "names a directory" in err


def test_text_file_named_npy(tmp_path, capsys):
    bad = tmp_path / "x.npy"
    bad.write_text("hello")
    assert main(["run", "demo", "--backend", "xs3", "-q", "--eval", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "is not a NumPy .npy file" in err and "numpy.save" in err
    assert "allow_pickle" not in err


def test_pickled_object_array(tmp_path, capsys):
    bad = tmp_path / "x.npy"
    np.save(bad, np.array([{}, 1], dtype=object), allow_pickle=True)
    assert main(["calibrate", "demo", "-q", "--calib", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "Python objects" in err and "allow_pickle" not in err


def test_calibrate_out_feeds_run_ranges(tmp_path, capsys):
    ranges = tmp_path / "ranges.json"
    assert main(["calibrate", "demo", "-q", "--out", str(ranges)]) == 0
    out = tmp_path / "r.json"
    code = main(
        ["run", "demo", "--backend", "xs3", "-q", "--ranges", str(ranges), "--json", str(out)]
    )
    assert code == 0
    assert json.loads(out.read_text())


def test_ranges_replaces_calib(tmp_path, capsys):
    code = main(["run", "demo", "--backend", "xs3", "--ranges", "r.json", "--calib", "c.npy"])
    assert code == 2
    assert "--ranges replaces calibration" in capsys.readouterr().err


def test_calibrate_accepts_calib_and_old_names(tmp_path, capsys):
    data = tmp_path / "c.npz"
    x = np.random.default_rng(0).random((4, 1, 8, 8), dtype=np.float32)
    np.savez(data, images=x)
    for flags in (
        ["--calib", str(data), "--calib-key", "images"],
        ["--data", str(data), "--key", "images"],
    ):
        assert main(["calibrate", "demo", "-q", *flags]) == 0
        assert json.loads(capsys.readouterr().out)["samples"] == 4


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "demo", "--batch-size", "0"],
        ["calibrate", "demo", "--limit", "-1"],
        ["calibrate", "demo", "--percentile", "200"],
        ["calibrate", "demo", "--bits", "40"],
        ["inspect", "demo", "--batch", "0"],
        ["run", "demo", "--backend", "xs3", "--batch-size", "x"],
        ["conformance", "--max-failures", "-1"],
    ],
)
def test_numeric_argument_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_load_demo_by_name():
    import quantemu
    from quantemu.graph import load_onnx

    assert load_onnx("demo").nodes
    assert quantemu.load_model("demo").nodes


def test_conformance_bundled_name_without_gz(tmp_path):
    result = _quantemu("conformance", "xs3/conv2d_deep.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "PASS" in result.stdout


def test_summary_table_fits_100_columns():
    result = _quantemu("demo", "-q", "--backend", "nvdla", columns=100)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert lines and max(len(line) for line in lines) <= 100
    assert "99.…" not in result.stdout and "99.17%" in result.stdout


def test_json_written_when_report_fails_late(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import quantemu.report

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(quantemu.report, "write_html", broken)
    out, report = tmp_path / "r.json", tmp_path / "r.html"
    argv = ["run", "demo", "--backend", "xs3", "-q", "--no-layers"]
    assert main([*argv, "--report", str(report), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not written: --report" in err and "No space left" in err
    assert json.loads(out.read_text())


def test_conformance_bad_json_path_fails_first(tmp_path, capsys):
    code = main(["conformance", "xs3/conv2d_deep.jsonl", "--json", str(tmp_path / "no/r.json")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def test_calibrate_out_is_checked_first(tmp_path, capsys):
    assert main(["calibrate", "demo", "-q", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--isa", "avx2", "--option", "isa=avx512_core"], ("--isa avx2", "--option isa=")),
        (
            ["--option", "onednn.reduce_range=true", "--option", "reduce_range=false"],
            ("onednn.reduce_range=true", "reduce_range=false"),
        ),
    ],
)
def test_one_option_given_two_values_is_an_error_naming_both(capsys, args, named):
    code = main(["run", "demo", "--backend", "onednn", *args, "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "onednn option" in err and "two values" in err
    for text in named:
        assert text in err


def test_one_option_given_the_same_value_twice_is_not_an_error():
    from quantemu.cli.options import check_options, parse_options

    # AVX2 and avx2 type to the same enum member
    texts = parse_options(["isa=AVX2"], ["onednn"], "avx2")
    assert check_options(texts)["onednn"].isa.value == "avx2"
