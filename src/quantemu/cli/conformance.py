"""``quantemu conformance [PATH ...]``: hold the emulation to vectors from real implementations.

Exit status: 0 when at least one case ran and every case passed; 1 when any case failed, errored
or is unsupported (or none ran); 2 for usage errors, such as a path that does not exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from quantemu.cli.argtypes import command_parser, non_negative_int
from quantemu.cli.checks import check_output_file
from quantemu.cli.console import USAGE_ERROR, fail, is_tty
from quantemu.conformance import report
from quantemu.conformance.reader import SuiteError, VectorFile
from quantemu.conformance.runner import run_suite
from quantemu.conformance.suite import bundled_files, collect_named
from quantemu.errors import QuantemuError

_SUMMARY = "check the emulation against conformance vectors"

_DESCRIPTION = """\
Run conformance vectors (conformance/FORMAT.md) and check, case by case, that the emulation
reproduces the expected outputs bit for bit. PATH is a .jsonl or .jsonl.gz file, or a directory
searched recursively for them; a name that is not on disk is looked up in the bundled suite
(xs3/conv2d_deep.jsonl finds the bundled .jsonl.gz, xs3 the bundled xs3 files). Without PATH,
the public suite bundled with quantemu runs.

Exit status: 0 when every case passed, 1 when any case failed, errored or is unsupported,
2 for usage errors."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``conformance`` subcommand; its ``run`` default is :func:`run`."""
    parser = command_parser(subparsers, "conformance", _SUMMARY, _DESCRIPTION)
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="vector files or directories (default: bundled)"
    )
    parser.add_argument(
        "--json",
        dest="json_path",
        metavar="FILE",
        help="also write a machine-readable report to FILE ('-' for stdout; the text report "
        "then goes to stderr)",
    )
    parser.add_argument(
        "--max-failures",
        type=non_negative_int,
        default=10,
        metavar="N",
        help="list at most N failures and N errors per operator (default: 10)",
    )
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="print the traceback of every listed internal error (a crash in quantemu)",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the suite that ``args`` names, print the report, and return the exit status."""
    try:
        check_output_file(args.json_path, "--json")
        files = collect_named(args.paths) if args.paths else bundled_files()
    except (SuiteError, QuantemuError) as exc:
        return fail("conformance", str(exc), USAGE_ERROR)
    # With --json -, stdout carries only the JSON document.
    text_out = sys.stderr if args.json_path == "-" else sys.stdout
    progress = _Progress(sys.stderr, len(files)) if is_tty(sys.stderr) else None
    try:
        result = run_suite(files, on_file=progress)
    finally:
        if progress is not None:
            progress.clear()
    text_out.write(
        report.format_text(result, max_listed=args.max_failures, tracebacks=args.traceback)
    )
    text_out.flush()
    if args.json_path is not None:
        document = json.dumps(report.to_json(result, paths=args.paths), indent=1, allow_nan=False)
        try:
            _write_json(args.json_path, document)
        except OSError as exc:
            return fail("conformance", f"cannot write {args.json_path}: {exc}", USAGE_ERROR)
    return result.exit_code


def _write_json(path: str, document: str) -> None:
    if path == "-":
        sys.stdout.write(document + "\n")
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8") as out:
        out.write(document + "\n")


class _Progress:
    """A single, self-overwriting ``[i/n] file`` line on a terminal."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self._stream = stream
        self._total = total

    def __call__(self, index: int, vf: VectorFile) -> None:
        self._stream.write(f"\r\x1b[K[{index + 1}/{self._total}] {vf.display}")
        self._stream.flush()

    def clear(self) -> None:
        """Erase the progress line before the report is printed."""
        self._stream.write("\r\x1b[K")
        self._stream.flush()
