"""``quantemu demo``: the whole flow on the built-in default, for every backend.

The built-in digits CNN is calibrated on its bundled calibration split, lowered onto every
backend the way each target's toolchain does it, and simulated bit-exactly on the bundled test
split (360 labelled samples); the command prints one row per backend: float vs backend top-1,
agreement with the float model, the worst layer and every counter the target keeps.

Exit status: 0 when every backend ran; 1 when one could not (its row says why); 2 for usage
errors (an output path that cannot be written, checked before the simulation; the HTML report
without matplotlib).
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from quantemu.backends.registry import known_backends
from quantemu.cli.argtypes import command_parser
from quantemu.cli.checks import check_output_dir, check_output_file
from quantemu.cli.console import INPUT_ERROR, USAGE_ERROR, fail, stderr_console, stdout_console
from quantemu.cli.loading import DEMO, demo_split, load_model
from quantemu.cli.simulation import open_session, print_outcome
from quantemu.errors import QuantemuError

if TYPE_CHECKING:
    from quantemu.simulate.session import Outcome

_SUMMARY = "simulate the built-in model on every backend and compare with float"

_DESCRIPTION = """\
Run quantemu's whole flow on the built-in default: the digits CNN (quantemu inspect demo) is
calibrated on its bundled calibration split (256 samples), quantized for each backend the way
that target's toolchain does it, and simulated with the target's exact integer arithmetic on the
bundled test split (360 labelled samples). Prints, per backend, float vs backend top-1 accuracy,
agreement with the float model's predictions, the worst layer by SQNR and the target's counters
(saturation, LUT under/overflow). For the per-layer tables of one backend use
'quantemu run demo --backend NAME'."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``demo`` subcommand; its ``run`` default is :func:`run`."""
    p = command_parser(subparsers, "demo", _SUMMARY, _DESCRIPTION)
    p.add_argument(
        "--backend",
        choices=[*known_backends(), "all"],
        default="all",
        help="one backend, or all (default)",
    )
    p.add_argument(
        "--report",
        metavar="DIR",
        help="write one HTML report per backend into DIR (created if needed; not a file)",
    )
    p.add_argument("--json", metavar="FILE.json", help="write the results as JSON (- for stdout)")
    p.add_argument("--layers", action="store_true", help="also print every per-layer table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or status lines")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the demo as ``args`` asks; return the exit status."""
    try:
        check_output_dir(args.report, "--report")
        check_output_file(args.json, "--json")
        if args.report:
            from quantemu.report import require_matplotlib

            require_matplotlib()
    except QuantemuError as exc:
        return fail("demo", str(exc), USAGE_ERROR)
    status = stderr_console(args.quiet)
    backends = known_backends() if args.backend == "all" else [args.backend]
    start = time.perf_counter()
    try:
        session = open_session(load_model(DEMO), backends, quiet=args.quiet, keep_going=True)
        x, labels = demo_split("test")
        outcome = session.evaluate(demo_split("calib")[0], x, labels)
    except QuantemuError as exc:
        return fail("demo", str(exc), INPUT_ERROR)
    if args.json != "-":  # stdout holds the JSON document then
        _print(args, outcome, f"{x.shape[0]} test samples", time.perf_counter() - start)
    failed = _write(args, outcome, status)
    if failed:
        return fail("demo", "not written: " + "; ".join(failed), USAGE_ERROR)
    return INPUT_ERROR if outcome.errors else 0


def _print(args: argparse.Namespace, outcome: Outcome, samples: str, seconds: float) -> None:
    console = stdout_console()
    print_outcome(outcome, console, tables=args.layers, compare=True)
    first = outcome.evaluations[0].backend if outcome.evaluations else outcome.backends[0]
    console.print(
        f"digits CNN, {samples}, {len(outcome.timings) + len(outcome.errors)} backend(s) in "
        f"{seconds:.1f} s. Per-layer tables: quantemu run demo --backend {first}; plots: "
        "quantemu demo --report DIR.",
        highlight=False,
    )


def _write(args: argparse.Namespace, outcome: Outcome, status) -> list[str]:
    """Write the reports and the JSON document; what could not be written, as messages."""
    from quantemu.report import write_html, write_json

    failed = []
    if args.report:
        try:
            Path(args.report).mkdir(parents=True, exist_ok=True)
            for evaluation in outcome.evaluations:
                path = Path(args.report) / f"{evaluation.backend}.html"
                write_html(evaluation, path, model=DEMO)
                if status is not None:
                    status.print(f"wrote {path}", highlight=False)
        except OSError as exc:
            failed.append(f"--report {exc.filename or args.report}: {exc.strerror or exc}")
    if args.json:
        try:
            write_json(outcome.evaluations, args.json, model=DEMO, errors=outcome.errors)
        except OSError as exc:
            failed.append(f"--json {args.json}: {exc.strerror or exc}")
    return failed
