"""MINIMUM and MAXIMUM on int8 codes (``maximum_minimum.cc``; LiteRT BUILTIN_REF and
TFLite-Micro alike, ``elementwise_peer_vectors.json`` holds both): ``min`` / ``max`` of the raw
codes, no arithmetic. TFLite's converter gives both inputs and the output one quantization (a
constant operand takes the input's); the kernel does not check it. Each kernel has a Python-int
twin (``*_reference``).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.elementwise import int8_operands

__all__ = ["maximum_int8", "maximum_reference", "minimum_int8", "minimum_reference"]


def minimum_int8(x1, x2):
    """int8 MINIMUM with NumPy broadcasting: ``(y, {})``.

    Formula: ``y = min(x1, x2)`` on the codes (no requantization).

    Policy: exact; the codes are compared as given, so both inputs and the output must share
    one quantization (TFLite's converter arranges it; the kernel does not check).

    Mirrors: ``reference_ops::MaximumMinimumBroadcastSlow`` with ``MinimumOp`` (LiteRT,
    TFLite-Micro ``maximum_minimum.cc``).

    >>> minimum_int8(np.array([[-5, 3]]), np.array([0]))[0].tolist()
    [[-5, 0]]
    """
    a, b = int8_operands(x1, x2, "minimum_int8")
    return np.minimum(a, b).astype(np.int8), {}


def maximum_int8(x1, x2):
    """int8 MAXIMUM with NumPy broadcasting: ``(y, {})``.

    Formula: ``y = max(x1, x2)`` on the codes (no requantization).

    Policy: exact; one quantization for inputs and output, as :func:`minimum_int8`.

    Mirrors: ``reference_ops::MaximumMinimumBroadcastSlow`` with ``MaximumOp``.

    >>> maximum_int8(np.array([[-5, 3]]), np.array([0]))[0].tolist()
    [[0, 3]]
    """
    a, b = int8_operands(x1, x2, "maximum_int8")
    return np.maximum(a, b).astype(np.int8), {}


def minimum_reference(a: int, b: int) -> int:
    """The Python-int twin of :func:`minimum_int8`, one element."""
    return a if a < b else b


def maximum_reference(a: int, b: int) -> int:
    """The Python-int twin of :func:`maximum_int8`, one element."""
    return a if a > b else b
