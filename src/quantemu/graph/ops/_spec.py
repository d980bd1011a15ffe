"""The operator table: one :class:`OpSpec` (shape function + float kernel) per ONNX op type.

Each ``ops`` module registers its operators with :func:`op`. The shape function receives the
node and the :class:`TensorInfo` of each input (``None`` for an omitted optional input) and
returns the output shapes; it raises :class:`InvalidInputError` naming the node when the shapes
do not fit together. The kernel receives the node's attributes and its input arrays (float32) and
returns the output arrays (float32).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import UNKNOWN_DIM, Attrs, Dim, Node, Shape, TensorInfo

ShapeFn = Callable[[Node, Sequence[TensorInfo | None]], Sequence[Shape]]
Kernel = Callable[[Attrs, Sequence[np.ndarray | None]], Sequence[np.ndarray]]
MacsFn = Callable[[Node, Sequence[TensorInfo | None], Sequence[TensorInfo]], int]


@dataclass(frozen=True)
class OpSpec:
    """How to infer shapes for, and run, one op type."""

    op_type: str
    infer: ShapeFn
    run: Kernel
    min_inputs: int
    max_inputs: int
    macs: MacsFn | None = None


OPS: dict[str, OpSpec] = {}


def register(
    op_type: str,
    infer: ShapeFn,
    run: Kernel,
    *,
    inputs: int | tuple[int, int] = 1,
    macs: MacsFn | None = None,
) -> None:
    """Add ``op_type`` to :data:`OPS`."""
    low, high = (inputs, inputs) if isinstance(inputs, int) else inputs
    OPS[op_type] = OpSpec(op_type, infer, run, low, high, macs)


# -- shape helpers shared by the op modules ---------------------------------------------------


def fail(node: Node, message: str) -> InvalidInputError:
    """An :class:`InvalidInputError` that names the node."""
    return InvalidInputError(f"{node}: {message}")


def data(node: Node, infos: Sequence[TensorInfo | None], index: int, rank: int | None = None):
    """Input ``index``'s info, checking it is present and (optionally) of rank ``rank``."""
    info = infos[index] if index < len(infos) else None
    if info is None:
        raise fail(node, f"input {index} is required")
    if rank is not None and info.rank != rank:
        raise fail(
            node,
            f"input {index} ({info.name!r}) must have rank {rank}, got shape {info.shape}",
        )
    return info


def known(dim: Dim) -> bool:
    """True for a concrete (integer) dimension."""
    return isinstance(dim, int)


def same_dim(node: Node, a: Dim, b: Dim, what: str) -> Dim:
    """``a`` and ``b`` describe the same dimension: check when both are known, keep the best."""
    if known(a) and known(b):
        if a != b:
            raise fail(node, f"{what}: {a} != {b}")
        return a
    if known(a):
        return a
    if known(b):
        return b
    return a if a == b else UNKNOWN_DIM


def broadcast(node: Node, shapes: Sequence[Shape]) -> Shape:
    """NumPy/ONNX multidirectional broadcasting of ``shapes``."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out: list[Dim] = []
    for axis in range(rank):
        dims = [s[axis] for s in padded]
        result: Dim = 1
        for dim in dims:
            if dim == 1:
                continue
            if result == 1:
                result = dim
            elif known(result) and known(dim) and result != dim:
                shown = " and ".join(str(tuple(s)) for s in shapes)
                raise fail(node, f"shapes {shown} cannot be broadcast (axis {axis})")
            elif not known(result):
                result = dim if known(dim) else (result if result == dim else UNKNOWN_DIM)
        out.append(result)
    return tuple(out)


def split_dim(dim: Dim) -> tuple[str | None, int]:
    """``dim`` as (symbol, factor): ``"batch*64"`` is ("batch", 64), ``"batch"`` ("batch", 1),
    ``12`` (None, 12). The unknown dim ``"?"`` is its own symbol, never combined."""
    if known(dim):
        return None, int(dim)
    base, star, factor = str(dim).rpartition("*")
    if star and base and factor.isdigit():
        return base, int(factor)
    return str(dim), 1


def scaled_dim(symbol: str, factor: int) -> Dim:
    """The symbolic dim ``symbol * factor`` (a flattened batch: ``"batch*64"``)."""
    if symbol == UNKNOWN_DIM:
        return UNKNOWN_DIM
    return symbol if factor == 1 else f"{symbol}*{factor}"


def mul_dims(dims: Sequence[Dim]) -> Dim:
    """The product of ``dims``; symbolic (``"batch*64"``) when one factor is symbolic, so that a
    batch flattened with other dims can be recovered by a later Reshape's -1."""
    product = 1
    symbols: list[str] = []
    for dim in dims:
        symbol, factor = split_dim(dim)
        product *= factor
        if symbol is not None:
            symbols.append(symbol)
    if not symbols:
        return product
    if len(symbols) == 1:
        return scaled_dim(symbols[0], product)
    return UNKNOWN_DIM
