"""``quantemu inspect MODEL``: print a model's graph summary, list passes, dump after passes,
(``--lint BACKEND``) check a backend's model constraints, and (``--support``) show which backend
runs which operator.

Exit status: 0 on success; 1 when the model cannot be imported (the message says why) or a
lint finding is an error; 2 for usage errors.
"""

# Everything beyond argparse and the registry is imported when the command runs, so that
# `quantemu` starts quickly whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from quantemu.backends.registry import backend_specs
from quantemu.cli.argtypes import command_parser, positive_int, repeatable
from quantemu.cli.console import INPUT_ERROR, USAGE_ERROR, fail, stdout_console
from quantemu.cli.loading import load_model, resolve_model
from quantemu.errors import QuantemuError

if TYPE_CHECKING:
    from rich.console import Console

    from quantemu.graph import Graph

_SUMMARY = "print a model's graph summary (shapes, parameters, passes)"

_DESCRIPTION = """\
Import an ONNX or TFLite model and print its graph: one row per node with input, weight and
output shapes, parameter and MAC counts, and totals; for a pre-quantized model (an int8 .tflite
file, a QDQ .onnx file) also every node's quantization: the TFLite operator, the scale, zero
point and dtype of its inputs, weights (per-channel scales as their range), bias and output.
MODEL is a .onnx or .tflite file or the word 'demo' (the built-in digits CNN). With --optimize
the default pass pipeline runs first; --dump-after PASS and --dump-passes print the graph after
passes; --passes lists the passes. --lint BACKEND lists
where the optimized model breaks the backend's model constraints, with advice (backends with a
registered lint: {lint}). --support lowers the optimized model on every backend and prints a
table: one row per op type, one column per backend, each cell exact (bit-exact integer layer),
inexact, float (float fallback), fused or unsupported (see quantemu.simulate.support); it is a
flag because it lowers the model once per backend. An ONNX operator quantemu cannot import does
not stop inspect: the node is shown as 'Unsupported' and every such node is listed.

Exit status: 0 on success (and with --lint, when no finding is an error); 1 when the model
cannot be imported or a lint finding is an error; 2 for usage errors."""


def lint_backends() -> list[str]:
    """The registered backends that have a model-constraints lint."""
    return [s.name for s in backend_specs() if s.lint is not None]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``inspect`` subcommand; its ``run`` default is :func:`run`."""
    linted = lint_backends()
    parser = command_parser(
        subparsers, "inspect", _SUMMARY, _DESCRIPTION.format(lint=", ".join(linted) or "none")
    )
    parser.add_argument(
        "model", nargs="?", metavar="MODEL", help="a .onnx or .tflite file, or 'demo'"
    )
    parser.add_argument("--passes", action="store_true", help="list the graph passes and exit")
    parser.add_argument(
        "-O", "--optimize", action="store_true", help="run the default pass pipeline first"
    )
    repeatable(
        parser,
        "--dump-after",
        "PASS",
        "run the pipeline and print the graph after PASS (repeatable)",
    )
    parser.add_argument(
        "--dump-passes", action="store_true", help="print the graph after every pass"
    )
    parser.add_argument(
        "--batch", type=positive_int, metavar="N", help="bind a symbolic batch dimension to N"
    )
    parser.add_argument(
        "--lint",
        choices=linted,
        metavar="BACKEND",
        help="also check the backend's model constraints on the optimized graph and list the "
        f"findings (backends: {', '.join(linted)}); exit status 1 if any is an error",
    )
    parser.add_argument(
        "--support",
        action="store_true",
        help="lower the optimized model on every backend and print, per op type, whether each "
        "runs it exact, as a float fallback, or not at all",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print what ``args`` asks for; return the exit status."""
    from quantemu.graph.passes import PASSES

    console = stdout_console()
    if args.passes:
        _print_passes(console)
        return 0
    if args.model is None:
        return fail("inspect", "MODEL is required (a .onnx file or 'demo')", USAGE_ERROR)
    unknown = [p for p in args.dump_after if p not in PASSES]
    if unknown:
        message = f"unknown pass {', '.join(unknown)}; passes: {', '.join(PASSES)}"
        return fail("inspect", message, USAGE_ERROR)
    try:
        graph = _inspect(args, console)
        _print_unimported(graph, console, hint=not args.support)
        if args.support:
            _support(graph, console)
        if args.lint:
            return _lint(graph, args.lint, console)
    except QuantemuError as exc:
        return fail("inspect", str(exc), INPUT_ERROR)
    return 0


def _print_passes(console: Console) -> None:
    from quantemu.graph.passes import DEFAULT_PIPELINE, PASSES

    for p in PASSES.values():
        marker = "*" if p.name in DEFAULT_PIPELINE else " "
        console.print(f"{marker} {p.name:<18} {p.description}", highlight=False, markup=False)
    console.print("(* = in the default pipeline, in this order)", highlight=False)


def _lint(graph: Graph, backend: str, console: Console) -> int:
    """Print the ``backend`` lint findings of ``graph``; 1 when any finding is an error."""
    from rich.table import Table

    from quantemu.simulate.support import lint_findings

    findings = lint_findings(graph, backend)
    console.rule(f"{backend} model constraints")
    if not findings:
        console.print("no findings", highlight=False)
        return 0
    table = Table("node", "rule", "severity", "finding", "advice", show_lines=True)
    for f in findings:
        table.add_row(f.node, f.rule, f.severity.value, f.message, f.advice)
    console.print(table)
    return 1 if any(f.severity.value == "error" for f in findings) else 0


def _support(graph: Graph, console: Console) -> None:
    from quantemu.report.support import print_support
    from quantemu.simulate.support import support_table

    print_support(support_table(graph), console)


def _print_unimported(graph: Graph, console: Console, *, hint: bool) -> None:
    """Every node the importer kept opaque, grouped by ONNX op type (nothing when none)."""
    from quantemu.graph.ops.unsupported import describe, unsupported_nodes

    nodes = unsupported_nodes(graph)
    if not nodes or not hint:
        return
    entries = [(n.attrs["onnx_op"], n.name, n.attrs["reason"]) for n in nodes]
    console.print(f"{len(nodes)} node(s) could not be imported:", highlight=False)
    console.print(describe(entries), highlight=False, markup=False)
    console.print("(--support shows what each backend runs)", highlight=False, markup=False)


def _load_lenient(text: str) -> Graph:
    """MODEL imported for inspection: an ONNX node quantemu cannot import is kept opaque."""
    from quantemu.graph.loading import is_tflite
    from quantemu.graph.onnx_import import load_onnx

    path = resolve_model(text)
    if is_tflite(path) or not path.exists():
        return load_model(text)  # its own messages for these
    return load_onnx(path, strict=False)


def _inspect(args: argparse.Namespace, console: Console) -> Graph:
    from quantemu.graph.passes import run_passes
    from quantemu.graph.summary import print_summary

    graph = _load_lenient(args.model)
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
