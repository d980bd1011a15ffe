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


def percentile(text: str) -> float:
    """A percentile in (0, 100], or a usage error.

    >>> percentile("99.9")
    99.9
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"expected a percentile in (0, 100], got {text!r}")
    return value


def bits(text: str) -> int:
    """A bit width from 2 to 16, or a usage error.

    >>> bits("8")
    8
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 2 <= value <= 16:
        raise argparse.ArgumentTypeError(f"expected a bit width from 2 to 16, got {text!r}")
    return value


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
