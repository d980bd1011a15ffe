"""Catalog cases of the command line: usage errors exit 2 before any work, bad data files 1."""

from __future__ import annotations

import numpy as np

from tests.catalog.support import Bad, CliRefused, cli, npy, tmp, write

C = CliRefused


def _npz() -> str:
    path = tmp() / "d.npz"
    np.savez(path, x=np.zeros((4, 1, 8, 8), np.float32))
    return str(path)


def _run(*args: str):
    return lambda: cli("run", "demo", "--backend", "xs3", "-q", *args)


CASES = (
    Bad("cli_backend", "an unknown --backend",
        lambda: cli("run", "demo", "--backend", "tpu"), C, ("invalid choice: 'tpu'", "nnie"), 2),
    Bad("cli_option_syntax", "an --option without KEY=VALUE",
        lambda: cli("run", "demo", "--backend", "onednn", "--option", "isa"), C,
        ("--option 'isa'", "KEY=VALUE"), 2),
    Bad("cli_option_value", "an --option value the backend rejects",
        lambda: cli("run", "demo", "--backend", "onednn", "-q", "--option", "isa=sse2"), C,
        ("isa = 'sse2'", "avx2"), 2),
    Bad("cli_option_backend", "another backend's option",
        _run("--option", "isa=avx2"), C, ("unknown option(s) 'isa'", "the options are"), 2),
    Bad("cli_eval_text", "a text file named .npy", lambda: cli(
        "run", "demo", "--backend", "xs3", "-q", "--eval", write("t.npy", "hello\n")), C,
        ("not a NumPy .npy file", "numpy.save"), 1),
    Bad("cli_eval_pickle", "a pickled object array",
        lambda: cli("run", "demo", "--backend", "xs3", "-q", "--eval",
                    npy("obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)), C,
        ("Python objects", "pickle", "numeric array"), 1),
    Bad("cli_eval_missing", "an --eval file that does not exist",
        _run("--eval", "/nonexistent/x.npy"), C, ("/nonexistent/x.npy", "does not exist"), 1),
    Bad("cli_npz_key", "an .npz key that is not in the archive",
        lambda: cli("run", "demo", "--backend", "xs3", "-q", "--eval", _npz(),
                    "--eval-key", "nope"), C, ("key 'nope'", "its arrays: x"), 1),
    Bad("cli_json_directory", "a --json path in a directory that does not exist",
        _run("--json", "/nonexistent/dir/r.json"), C,
        ("cannot write --json", "does not exist", "mkdir -p"), 2),
    Bad("cli_ranges_and_calib", "--ranges together with --calib",
        _run("--ranges", "r.json", "--calib", "c.npy"), C,
        ("--ranges replaces calibration", "--eval"), 2),
    Bad("cli_batch_size", "a --batch-size of 0", _run("--batch-size", "0"), C,
        ("--batch-size", "positive integer", "'0'"), 2),
    Bad("cli_input_shape", "a malformed --input-shape", _run("--input-shape", "input=axb"), C,
        ("--input-shape", "NAME=D0xD1", "'input=axb'"), 2),
    Bad("cli_inspect_missing", "inspect on a model file that does not exist",
        lambda: cli("inspect", "/nonexistent/m.onnx"), C,
        ("/nonexistent/m.onnx", "does not exist", ".onnx, .tflite"), 1),
    Bad("cli_conformance_missing", "conformance on a path that does not exist",
        lambda: cli("conformance", "/nonexistent/vectors"), C,
        ("does not exist", "xs3/conv2d_deep.jsonl"), 2),
    Bad("cli_percentile", "a percentile above 100 on the command line",
        lambda: cli("calibrate", "demo", "--observer", "percentile", "--percentile", "150"), C,
        ("--percentile", "(0, 100]", "'150'"), 2),
    Bad("cli_lint_backend", "a lint for a backend that has none",
        lambda: cli("inspect", "demo", "--lint", "tpu"), C, ("--lint", "'tpu'", "nnie"), 2),
    Bad("cli_demo_report_file", "demo --report onto an existing file",
        lambda: cli("demo", "-q", "--report", write("report.html", "x")), C,
        ("is a file", "names a directory", "_reports"), 2),
)  # fmt: skip
