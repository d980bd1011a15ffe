"""``quantemu inspect MODEL``: print a model's graph summary, list passes, dump after passes,
and (``--lint TARGET``) check a target's model constraints.

Exit status: 0 on success; 1 when the model cannot be imported (the message says why) or a
lint finding is an error; 2 for usage errors.
"""

# Everything beyond argparse is imported when the command runs, so that `quantemu` starts quickly
# whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from quantemu.errors import QuantemuError

if TYPE_CHECKING:
    from rich.console import Console

USAGE_ERROR = 2
MODEL_ERROR = 1

_DESCRIPTION = """\
Import an ONNX model and print its graph: one row per node with input, weight and output shapes,
parameter and MAC counts, and totals. MODEL is a .onnx file or the word 'demo' (the built-in
digits CNN). With --optimize the default pass pipeline runs first; --dump-after PASS and
--dump-passes print the graph after passes; --passes lists the passes. --lint nnie lists where the
model breaks HiSilicon NNIE's constraints (pooling ceil_mode, depthwise convolution, upsampling).

Exit status: 0 on success (and with --lint, when no finding is an error); 1 when the model
cannot be imported or a lint finding is an error; 2 for usage errors."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``inspect`` subcommand; its ``run`` default is :func:`run`."""
    parser = subparsers.add_parser(
        "inspect",
        help="print a model's graph summary (shapes, parameters, passes)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", nargs="?", metavar="MODEL", help="a .onnx file, or 'demo'")
    parser.add_argument("--passes", action="store_true", help="list the graph passes and exit")
    parser.add_argument(
        "-O", "--optimize", action="store_true", help="run the default pass pipeline first"
    )
    parser.add_argument(
        "--dump-after",
        action="append",
        default=[],
        metavar="PASS",
        help="run the pipeline and print the graph after PASS (repeatable)",
    )
    parser.add_argument(
        "--dump-passes", action="store_true", help="print the graph after every pass"
    )
    parser.add_argument(
        "--batch", type=int, metavar="N", help="bind a symbolic batch dimension to N"
    )
    parser.add_argument(
        "--lint",
        choices=LINT_TARGETS,
        metavar="TARGET",
        help="also check the target's model constraints on the optimized graph and list the "
        f"findings (targets: {', '.join(LINT_TARGETS)}); exit status 1 if any is an error",
    )
    parser.set_defaults(run=run)
    return parser


# Targets with a model-constraints lint (``quantemu.backends.<target>.lower.lint_graph``).
LINT_TARGETS = ("nnie",)


def resolve_model(text: str) -> Path:
    """``demo`` names the built-in model; anything else is a path."""
    if text == "demo":
        from quantemu.data import demo_model_path

        return demo_model_path()
    return Path(text)


def make_console() -> Console:
    """A stdout console; wide enough for the table when stdout is not a terminal."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=160, color_system=None, force_terminal=False)


def run(args: argparse.Namespace) -> int:
    """Print what ``args`` asks for; return the exit status."""
    from quantemu.graph.passes import DEFAULT_PIPELINE, PASSES

    console = make_console()
    if args.passes:
        for p in PASSES.values():
            marker = "*" if p.name in DEFAULT_PIPELINE else " "
            console.print(f"{marker} {p.name:<18} {p.description}", highlight=False, markup=False)
        console.print("(* = in the default pipeline, in this order)", highlight=False)
        return 0
    if args.model is None:
        print(
            "quantemu inspect: error: MODEL is required (a .onnx file or 'demo')", file=sys.stderr
        )
        return USAGE_ERROR
    unknown = [p for p in args.dump_after if p not in PASSES]
    if unknown:
        print(
            f"quantemu inspect: error: unknown pass {', '.join(unknown)}; passes: "
            f"{', '.join(PASSES)}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    try:
        graph = _inspect(args, console)
        if args.lint:
            return _lint(graph, args.lint, console)
    except QuantemuError as exc:
        print(f"quantemu inspect: error: {exc}", file=sys.stderr)
        return MODEL_ERROR
    return 0


def _lint(graph, target: str, console: Console) -> int:
    """Print the ``target`` lint findings of ``graph``; 1 when any finding is an error."""
    import importlib

    from rich.table import Table

    from quantemu.graph.passes import optimize

    lint_graph = importlib.import_module(f"quantemu.backends.{target}.lower").lint_graph
    findings = lint_graph(optimize(graph))
    console.rule(f"{target} model constraints")
    if not findings:
        console.print("no findings", highlight=False)
        return 0
    table = Table("node", "rule", "severity", "finding", "advice", show_lines=True)
    for f in findings:
        table.add_row(f.node, f.rule, f.severity.value, f.message, f.advice)
    console.print(table)
    return 1 if any(f.severity.value == "error" for f in findings) else 0


def _inspect(args: argparse.Namespace, console: Console):
    from quantemu.graph.onnx_import import load_onnx
    from quantemu.graph.passes import run_passes
    from quantemu.graph.summary import print_summary

    graph = load_onnx(resolve_model(args.model))
    if args.batch is not None:
        graph = graph.with_batch(args.batch)
    dumps = set(args.dump_after)

    def on_pass(name: str, after) -> None:
        if args.dump_passes or name in dumps:
            console.rule(f"after pass {name}")
            print_summary(after, console)

    if args.optimize or dumps or args.dump_passes:
        graph = run_passes(graph, on_pass=on_pass)
        if args.optimize and not args.dump_passes:
            console.rule("after the default pipeline")
            print_summary(graph, console)
    else:
        print_summary(graph, console)
    return graph
