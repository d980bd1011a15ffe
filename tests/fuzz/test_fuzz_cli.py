"""Fuzz the command line: random combinations of every command's flags with random values.

Flags come from the parser itself, so renamed or new ones are covered. Run in process, in a
scratch directory that holds small data files. The invariant: an exit status of 0, 1 or 2, a
message on stderr for a failure, and never a traceback or an exception escaping ``main``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fuzz_helpers import examples, time_limit
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_fuzz_onnx import SMALL

from quantemu.cli import build_parser, main
from quantemu.data import demo_model_path

TFLITE = Path(__file__).resolve().parents[1] / "data" / "tflite_refs" / "add.int8.tflite"

MODELS = ["demo", str(demo_model_path()), "small.onnx", str(TFLITE), "missing.onnx", "bad.npy"]
MODELS += ["folder", ""]
PATHS = ["calib.npy", "eval.npy", "labels.npy", "nan.npy", "bad.npy", "data.npz", "ranges.json"]
PATHS += ["missing.npy", "folder", "missing/out.json", "out.json", "out.html", "out.npz", ""]
NUMBERS = ["0", "1", "2", "3", "-1", "8", "1e9", "nan", "inf", "-inf", "0.5", "abc", "", "99.9"]
WORDS = ["x", "input", "isa=avx2", "isa=bogus", "model=device", "bogus=1", "=", "input=1x1x8x8"]
WORDS += ["input=0x1x8x8", "in=1x3", "fold_bn", "xs3/conv2d_deep.jsonl", "-", "--", "\u00e9"]

PATHISH = {"calib", "data", "eval", "labels", "ranges", "report", "json", "json_path", "out"}
PATHISH |= {"save_outputs", "paths"}


def _commands() -> dict[str, list[argparse.Action]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
        for name, p in sub.choices.items()
    }


COMMANDS = _commands()


#: Plausible values by flag destination: most draws take one, so that calls get past parsing.
GOOD = {
    "model": ["demo", "demo", "small.onnx"],
    "calib": ["calib.npy"],
    "data": ["calib.npy", "data.npz"],
    "eval": ["eval.npy"],
    "labels": ["labels.npy"],
    "ranges": ["ranges.json"],
    "report": ["out.html", "report_dir"],
    "json": ["out.json"],
    "json_path": ["out.json"],
    "out": ["out.json"],
    "save_outputs": ["out.npz"],
    "paths": ["xs3/fully_connected_8.jsonl", "onednn/reorder.jsonl"],
    "key": ["x"],
    "calib_key": ["x"],
    "eval_key": ["x"],
    "isa": ["avx2", "avx512_core_vnni"],
    "option": ["isa=avx2", "model=device"],
    "input_shape": ["input=1x1x8x8", "input=2x1x8x8"],
    "batch_size": ["2"],
    "batch": ["2"],
    "max_failures": ["1"],
    "percentile": ["99.9"],
    "bits": ["8"],
    "axis": ["0", "1"],
    "limit": ["2"],
    "image_size": ["8"],
    "scale": ["0.0625"],
    "mean": ["0.5"],
    "std": ["0.25"],
    "dump_after": ["fold_bn"],
}


def _value(action: argparse.Action) -> st.SearchStrategy[str]:
    if action.choices:
        hostile = st.sampled_from([*map(str, action.choices), "bogus"])
    elif action.dest == "model":
        hostile = st.sampled_from(MODELS)
    elif action.dest in PATHISH:
        hostile = st.sampled_from(PATHS)
    else:
        hostile = st.sampled_from(NUMBERS + WORDS)
    good = GOOD.get(action.dest)
    if not good:
        return hostile
    return st.sampled_from(good) | st.sampled_from(good) | st.sampled_from(good) | hostile


@st.composite
def argv(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    actions = COMMANDS[command]
    args: list[str] = []
    if draw(st.integers(0, 5)) == 0:
        args += ["--threads", draw(st.sampled_from(["1", "2", "0", "-3", "x"]))]
    args.append(command)
    for action in actions:
        if not action.option_strings:  # a positional: usually given
            if action.nargs in ("?", "*") and draw(st.booleans()):
                continue
            args.append(draw(_value(action)))
            continue
        if not action.required and draw(st.integers(0, 3)) != 0:  # a flag in one call of four
            continue
        args.append(draw(st.sampled_from(action.option_strings)))
        nargs = action.nargs
        count = 0 if nargs == 0 else nargs if isinstance(nargs, int) else 1
        if nargs == "+":
            count = draw(st.integers(1, 3))
        args += [draw(_value(action)) for _ in range(count)]
    if command in ("run", "demo") and "-q" not in args:
        args.append("-q")  # keeps output small; progress bars are not under test
    if draw(st.integers(0, 9)) == 0:
        args.insert(draw(st.integers(0, len(args))), draw(st.sampled_from(WORDS + NUMBERS)))
    return args


def make_scratch(root: Path) -> None:
    """Small data files in ``root``; the demo model's calibrated ranges as ranges.json."""
    rng = np.random.default_rng(0)
    np.save(root / "calib.npy", rng.random((4, 1, 8, 8), np.float32) * 16)
    np.save(root / "eval.npy", rng.random((6, 1, 8, 8), np.float32) * 16)
    np.save(root / "labels.npy", rng.integers(0, 10, 6))
    np.save(root / "nan.npy", np.full((4, 1, 8, 8), np.nan, np.float32))
    np.savez(root / "data.npz", x=rng.random((4, 1, 8, 8), np.float32))
    (root / "bad.npy").write_text("not an array\n")
    (root / "small.onnx").write_bytes(SMALL[0])
    (root / "folder").mkdir()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["calibrate", "demo", "--out", str(root / "ranges.json"), "-q"])


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A scratch working directory: anything the CLI writes lands there."""
    root = Path(tempfile.mkdtemp(prefix="quantemu-fuzz-cli-"))
    before = os.getcwd()
    try:
        make_scratch(root)
        os.chdir(root)
        yield root
    finally:
        os.chdir(before)
        shutil.rmtree(root, ignore_errors=True)


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with time_limit(60), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@settings(**examples(40), suppress_health_check=[HealthCheck.too_slow])
@given(argv())
def test_cli_arguments(scratch: Path, args: list[str]) -> None:
    code, out, err = run_cli(args)
    event(f"{next((a for a in args if a in COMMANDS), '-')}: exit {code}")
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in out + err, err[-4000:]
    if code:
        assert err.strip(), f"exit {code} without a message"
