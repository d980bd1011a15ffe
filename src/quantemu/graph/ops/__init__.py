"""The float operator set: for each supported ONNX op, a shape function and a NumPy kernel.

Importing this package fills :data:`OPS`; :func:`spec` looks one up and names the supported set
when it is missing.
"""

from __future__ import annotations

from quantemu.errors import UnsupportedError
from quantemu.graph.ops import (
    activation,
    conv,
    custom,
    index,
    linear,
    normalize,
    numeric,
    pool,
    recurrent,
    resize,
    squeeze,
    tensor,
)
from quantemu.graph.ops._spec import OPS, OpSpec

__all__ = [
    "OPS",
    "OpSpec",
    "activation",
    "conv",
    "custom",
    "index",
    "linear",
    "normalize",
    "numeric",
    "pool",
    "recurrent",
    "resize",
    "spec",
    "squeeze",
    "tensor",
]


def spec(op_type: str, where: str = "") -> OpSpec:
    """The :class:`OpSpec` of ``op_type``; :class:`UnsupportedError` listing the set otherwise."""
    try:
        return OPS[op_type]
    except KeyError:
        prefix = f"{where}: " if where else ""
        raise UnsupportedError(
            f"{prefix}operator {op_type!r} is not supported; supported operators: "
            f"{', '.join(sorted(OPS))}"
        ) from None
