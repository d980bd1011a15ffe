"""The ``quantemu`` command line.

Each subcommand lives in its own module and contributes ``add_parser(subparsers)`` and
``run(args) -> int``; this file only assembles them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from quantemu import __version__
from quantemu._argtypes import positive_int
from quantemu.calibration import command as calibrate_command
from quantemu.conformance import command as conformance_command
from quantemu.graph import command as inspect_command
from quantemu.intmath import parallel
from quantemu.simulate import demo_command, run_command

_SUBCOMMANDS = (
    demo_command,
    run_command,
    conformance_command,
    inspect_command,
    calibrate_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quantemu",
        description="Bit-exact emulation of quantized inference targets.",
    )
    parser.add_argument("--version", action="version", version=f"quantemu {__version__}")
    parser.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        help="threads the integer primitives use on large arrays (default: the available "
        f"cores, at most 8; here {parallel.threads()}); results do not depend on it",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.threads is None:
        return int(args.run(args))
    with parallel.limit_threads(args.threads):
        return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
