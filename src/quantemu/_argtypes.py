"""Argument types shared by the command-line modules."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse ``type``: an int >= 1, or a usage error that quotes the text.

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
