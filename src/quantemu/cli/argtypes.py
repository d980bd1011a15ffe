"""Argument types shared by the commands (argparse ``type=`` callables)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An int >= 1, or a usage error that quotes the text.

    >>> positive_int("3")
    3
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


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
