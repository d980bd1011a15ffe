"""What every normalizer works with: the decoded ONNX node (:class:`RawNode`), what it may look
at (:class:`Context`), the registry (:func:`normalizer`, :data:`NORMALIZERS`) and the checks and
helpers the op families share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node, TensorInfo


@dataclass
class RawNode:
    """An ONNX node with its attributes decoded to Python values (strings, lists, arrays), and
    the checks and conversions a normalizer runs on it (their errors name the node)."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.op_type} '{self.name}'"

    def check_attrs(self, allowed: Iterable[str]) -> None:
        """Reject attributes outside ``allowed`` with a message naming the supported ones."""
        allowed = set(allowed)
        unknown = sorted(set(self.attrs) - allowed)
        if unknown:
            supported = ", ".join(sorted(allowed)) or "none"
            raise UnsupportedError(
                f"{self}: attribute {', '.join(map(repr, unknown))} is not supported for "
                f"{self.op_type}; supported attributes: {supported}"
            )

    def require(self, condition: bool, message: str) -> None:
        """Raise :class:`UnsupportedError` about this node unless ``condition``."""
        if not condition:
            raise UnsupportedError(f"{self}: {message}")

    def make(self, inputs: Iterable[str], attrs: dict[str, Any], outputs=None) -> Node:
        """The IR node with the given data inputs and normalized attributes."""
        outputs = tuple(outputs or self.outputs[:1])
        return Node(self.name, self.op_type, tuple(inputs), outputs, attrs)

    def single_output(self, ctx: Context, extra: str) -> None:
        """Optional training-only outputs (``extra``) may be declared but never used."""
        for name in self.outputs[1:]:
            self.require(
                not name or name not in ctx.used,
                f"output {name!r} ({extra}) is used, "
                "but quantemu imports inference graphs only; remove that use",
            )

    def ints(self, key: str, default: Iterable[int]) -> tuple[int, ...]:
        """Attribute ``key`` (``default`` when absent) as a tuple of ints."""
        return tuple(int(v) for v in self.attrs.get(key, default))

    def axis_index(self, axis: int, rank: int, *, inclusive: bool = False) -> int:
        """``axis`` of a rank-``rank`` input as a non-negative index (``inclusive``: ``rank``
        itself is allowed too, as Flatten's axis); out of range is an InvalidInputError."""
        limit = rank + 1 if inclusive else rank
        if not -rank <= axis < limit:
            raise InvalidInputError(f"{self}: axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis


@dataclass
class Context:
    """What a normalizer may look at: the opset, constant values, and known tensor infos."""

    opset: int
    consts: dict[str, np.ndarray]
    tensors: dict[str, TensorInfo]
    used: set[str]
    #: Values computed from a symbolic dimension (see :mod:`quantemu.graph.onnx_shape_fold`).
    derived: dict[str, Any] = field(default_factory=dict)

    def const(self, raw: RawNode, index: int, role: str) -> np.ndarray | None:
        """The constant value of input ``index`` (``None`` when omitted)."""
        if index >= len(raw.inputs) or not raw.inputs[index]:
            return None
        name = raw.inputs[index]
        if name not in self.consts:
            raise UnsupportedError(
                f"{raw}: input {index} ({role}, {name!r}) is computed at run time; quantemu "
                f"supports {raw.op_type} only with a constant (initializer) {role}"
            )
        return self.consts[name]

    def info(self, raw: RawNode, index: int = 0) -> TensorInfo:
        """The shape/dtype info of input ``index``."""
        return self.tensors[raw.inputs[index]]


#: The remedy for a size the import needs but the model leaves symbolic: the binding happens
#: before shape computations fold (a binding after import comes too late for them).
BIND_HINT = (
    "bind the input's dimensions when importing: --input-shape INPUT=1x3x224x224 on the "
    "command line, load_onnx(path, shapes={'INPUT': (1, 3, 224, 224)}) in Python"
)

Normalizer = Callable[[RawNode, Context], Node]
NORMALIZERS: dict[str, Normalizer] = {}


def normalizer(*op_types: str) -> Callable[[Normalizer], Normalizer]:
    """Register the decorated function as the normalizer of ``op_types``."""

    def decorate(fn: Normalizer) -> Normalizer:
        for op_type in op_types:
            NORMALIZERS[op_type] = fn
        return fn

    return decorate


def without_attributes(raw: RawNode, ctx: Context) -> Node:
    """The normalizer of an op that has no attributes: every input is data."""
    raw.check_attrs(())
    return raw.make(raw.inputs, {})
