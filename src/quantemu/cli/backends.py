"""``quantemu backends``: every registered backend with its target, scheme, options and lint.

What it prints is the registry (:mod:`quantemu.backends.registry`), the same entries that
``--backend``, ``--option``, ``--isa`` and ``inspect --lint`` read. Exit status: 0.
"""

from __future__ import annotations

import argparse

from quantemu.backends.registry import backend_specs
from quantemu.cli.console import stdout_console


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``backends`` subcommand; its ``run`` default is :func:`run`."""
    parser = subparsers.add_parser(
        "backends",
        help="list the registered backends and their lowering options",
        description="List every registered backend: the target it emulates, its quantization "
        "scheme, its lowering options (--option KEY=VALUE; enum values or types) and whether "
        "it has a model-constraints lint (quantemu inspect MODEL --lint BACKEND).",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the registered backends; return 0."""
    console = stdout_console()
    for spec in backend_specs():
        console.print(spec.name, style="bold", highlight=False)
        lint = f"yes (quantemu inspect MODEL --lint {spec.name})" if spec.lint else "no"
        rows = (
            ("target", spec.target),
            ("scheme", spec.scheme),
            ("options", spec.options.choices_text() or "(none)"),
            ("lint", lint),
        )
        for label, text in rows:
            console.print(f"  {label:<8} {text}", highlight=False, markup=False)
    return 0
