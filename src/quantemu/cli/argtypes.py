"""What the commands share for their arguments: argparse ``type=`` callables, and the
subcommand parser every command starts from."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def command_parser(
    subparsers: argparse._SubParsersAction, name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    """The subcommand ``name``: ``summary`` in ``quantemu --help``, ``description`` (kept as
    written, paragraphs and all) in ``quantemu NAME --help``."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def repeatable(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, **kwargs):
    """Add ``flag``, which may be given several times: its values are collected in a list,
    empty when it is not given (``kwargs``: more of ``add_argument``'s, such as ``type``)."""
    parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help, **kwargs)


def _checked(text: str, convert: Callable[[str], float], accept, expected: str):
    """``convert(text)`` where ``accept`` takes it, else a usage error that quotes the text."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1, or a usage error that quotes the text.

    >>> positive_int("3")
    3
    """
    return _checked(text, int, lambda v: v >= 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An int >= 0, or a usage error.

    >>> non_negative_int("0")
    0
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def percentile(text: str) -> float:
    """A percentile in (0, 100], or a usage error.

    >>> percentile("99.9")
    99.9
    """
    return _checked(text, float, lambda v: 0 < v <= 100, "a percentile in (0, 100]")


def bits(text: str) -> int:
    """A bit width from 2 to 16, or a usage error.

    >>> bits("8")
    8
    """
    return _checked(text, int, lambda v: 2 <= v <= 16, "a bit width from 2 to 16")


def input_shape(text: str) -> tuple[str, tuple[int | None, ...]]:
    """``NAME=1x3x224x224`` as ``(name, dims)``; ``N``, ``?`` or ``batch`` keeps a dimension.

    >>> input_shape("x=Nx3x224x224")
    ('x', (None, 3, 224, 224))
    """
    name, sep, dims = text.partition("=")
    parts = dims.lower().split("x") if dims else []
    try:
        shape = tuple(None if p in ("n", "?", "batch") else int(p) for p in parts)
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d is not None and d < 1 for d in shape):
        raise argparse.ArgumentTypeError(
            f"expected NAME=D0xD1x... (positive sizes, N to keep a dimension), got {text!r}"
        )
    return name, shape
