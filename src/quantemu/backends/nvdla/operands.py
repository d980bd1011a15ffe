"""The SDP's memory operands: their names, and the checks of a mapping of them against X.

Where a unit's ``*_SRC = 1``, the SDP reads its operand per element from memory (§2.1): one array
per name of :data:`OPERANDS`, of X's shape or broadcastable to it (``(1, C, 1, 1)`` for a
per-channel operand). The INT8/INT16 and the FP16 pipelines read them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from quantemu.errors import InvalidInputError

OPERANDS = ("BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL", "EW_ALU", "EW_MUL")


def known_operands(operands: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """``operands`` as a dict whose every name is one of :data:`OPERANDS`."""
    operands = dict(operands or {})
    unknown = sorted(set(operands) - set(OPERANDS))
    if unknown:
        raise InvalidInputError(
            f"sdp: unknown operand(s) {', '.join(unknown)}; known: {', '.join(OPERANDS)}"
        )
    return operands


def check_shape(shape: tuple[int, ...], name: str, x_shape: tuple[int, ...]) -> None:
    """An operand of ``shape`` must have X's shape ``x_shape`` or broadcast to it."""
    if shape == x_shape:
        return
    try:
        fits = np.broadcast_shapes(shape, x_shape) == x_shape
    except ValueError:
        fits = False
    if not fits:
        raise InvalidInputError(
            f"sdp: {name} has shape {shape}; X has shape {x_shape} (an operand must have "
            "X's shape or broadcast to it)"
        )


def memory_operands(
    operands: Mapping[str, np.ndarray], read: Callable[[np.ndarray, str], np.ndarray], absent
) -> dict[str, np.ndarray]:
    """Every operand by name: ``read(array, name)`` of those given, ``absent`` for the others
    (a zero that broadcasts like a per-element operand)."""
    return {n: read(operands[n], n) if operands.get(n) is not None else absent for n in OPERANDS}
