"""The ``quantemu`` command line: one module per command, and what they share.

Each command module (:mod:`.demo`, :mod:`.run`, :mod:`.conformance`, :mod:`.inspect`,
:mod:`.calibrate`, :mod:`.backends`) contributes ``add_parser(subparsers)`` and
``run(args) -> int``; this module only assembles them. Shared: :mod:`.console` (exit codes,
``fail``, consoles, progress bars), :mod:`.loading` (MODEL, data and labels), :mod:`.argtypes`,
:mod:`.options` (``--option``/``--isa`` through the backend registry) and :mod:`.simulation`
(one calibration, several backends).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from quantemu import __version__
from quantemu.cli import backends, calibrate, conformance, demo, inspect, run
from quantemu.cli.argtypes import positive_int
from quantemu.cli.console import USAGE_ERROR
from quantemu.intmath import parallel

_COMMANDS = (demo, run, conformance, inspect, calibrate, backends)


def build_parser() -> argparse.ArgumentParser:
    """The ``quantemu`` parser with every command."""
    parser = argparse.ArgumentParser(
        prog="quantemu",
        description="Bit-exact emulation of quantized inference targets.",
    )
    parser.add_argument("--version", action="version", version=f"quantemu {__version__}")
    parser.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        help="threads for batches run side by side and for the integer primitives on large "
        f"arrays (default: the available cores, at most 8; here {parallel.threads()}); results "
        "do not depend on it",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: ``sys.argv[1:]``) names; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return USAGE_ERROR
    if args.threads is None:
        return int(args.run(args))
    with parallel.limit_threads(args.threads):
        return int(args.run(args))
