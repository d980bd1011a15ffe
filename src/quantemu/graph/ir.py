"""The graph IR: typed, frozen values for tensors, nodes and whole graphs.

A :class:`Graph` is immutable. Passes build new graphs (:meth:`Graph.replace`), and every
construction re-validates the structure (unique names, no dangling input, topological order) and
re-runs shape inference, so ``graph.tensors`` always holds the shape and dtype of every value.

Shapes are tuples of dimensions: an ``int`` for a known size, a ``str`` for a symbolic one (the
batch dimension of an exported model, e.g. ``"batch"``), and ``"?"`` for a size that stays unknown
until the symbolic dimensions are bound (:meth:`Graph.with_batch`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError

Dim = int | str
Shape = tuple[Dim, ...]

#: The placeholder for a dimension whose size is unknown until symbolic dimensions are bound.
UNKNOWN_DIM = "?"

#: What :meth:`Graph.run_float` takes: one array, a sequence in input order, or a mapping by name.
Inputs = np.ndarray | Sequence[np.ndarray] | Mapping[str, np.ndarray]

#: The float executor behind :meth:`Graph.run_float`, installed by :mod:`quantemu.graph.executor`
#: when it is imported (the ``quantemu.graph`` package imports it before anything can use a
#: graph). The executor is built on the IR; the IR does not import it back.
_EXECUTORS: dict[str, Callable[..., dict[str, np.ndarray]]] = {}


def install_float_executor(run: Callable[..., dict[str, np.ndarray]]) -> None:
    """Make ``run(graph, inputs, *, intermediates)`` the executor of :meth:`Graph.run_float`."""
    _EXECUTORS["float"] = run


class Attrs(Mapping[str, Any]):
    """An immutable, hashable mapping of a node's normalized attributes.

    Values are Python scalars (``int``, ``float``, ``str``) or tuples of them; the importer
    normalizes every ONNX attribute (and every constant attribute-like input) into this form.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Attrs({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Attrs, (self._items,))

    def merged(self, **changes: Any) -> Attrs:
        """A copy with ``changes`` applied; a value of ``None`` removes the key."""
        items = dict(self._items)
        for key, value in changes.items():
            if value is None:
                items.pop(key, None)
            else:
                items[key] = value
        return Attrs(items)


@dataclass(frozen=True)
class TensorInfo:
    """A named value: its shape (see the module docstring) and NumPy dtype name."""

    name: str
    shape: Shape
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is a known integer."""
        return all(isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {format_shape(self.shape)} {self.dtype}"


@dataclass(frozen=True)
class QuantOverride:
    """Quantization parameters a QDQ model fixes for one tensor, kept exactly as in the file.

    ``scale`` and ``zero_point`` are NumPy arrays of the file's own dtypes (e.g. float32 and
    int8), 0-d for per-tensor quantization or 1-d along ``axis`` for per-axis quantization.
    ``values`` holds the integer data of a quantized initializer (a weight stored as int8 behind a
    DequantizeLinear); it is ``None`` for activations.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None
    values: np.ndarray | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("scale", "zero_point", "values"):
            value = getattr(self, name)
            if value is not None:
                value = np.array(value, copy=True)
                value.setflags(write=False)
                object.__setattr__(self, name, value)

    @property
    def dtype(self) -> str:
        """The quantized integer dtype (the zero point's dtype)."""
        return self.zero_point.dtype.name

    @property
    def per_axis(self) -> bool:
        """True for per-axis (per-channel) quantization."""
        return self.axis is not None

    def same_parameters(self, other: QuantOverride) -> bool:
        """True when scale, zero point (values and dtypes) and axis are identical."""
        return (
            self.axis == other.axis
            and self.scale.dtype == other.scale.dtype
            and self.zero_point.dtype == other.zero_point.dtype
            and np.array_equal(self.scale, other.scale)
            and np.array_equal(self.zero_point, other.zero_point)
        )


@dataclass(frozen=True)
class Node:
    """One operator application.

    ``op_type`` is the ONNX operator name; ``attrs`` are normalized (every default filled in,
    constant inputs such as Clip's min/max or Reshape's shape folded in, Conv pads as
    ``(top, left, bottom, right)``); ``inputs`` are the data inputs only (an empty string marks an
    omitted optional input).
    """

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs = field(default_factory=Attrs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    def __str__(self) -> str:
        return f"{self.op_type} '{self.name}'"

    def with_attrs(self, **changes: Any) -> Node:
        """A copy with attributes changed (``None`` removes one)."""
        return dataclasses.replace(self, attrs=self.attrs.merged(**changes))


def _freeze_initializers(initializers: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    frozen = {}
    for name, value in initializers.items():
        array = np.asarray(value)
        if array.flags.writeable:
            array = array.copy()
            array.setflags(write=False)
        frozen[name] = array
    return MappingProxyType(frozen)


@dataclass(frozen=True)
class Graph:
    """A whole model: inputs, outputs, nodes in topological order, initializers.

    ``tensors`` maps every value's name (inputs, initializers, node outputs) to its
    :class:`TensorInfo`; it is computed by shape inference on construction.
    ``quant_overrides`` maps tensor names to the :class:`QuantOverride` a QDQ model fixed.
    """

    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    initializers: Mapping[str, np.ndarray] = field(default_factory=dict)
    quant_overrides: Mapping[str, QuantOverride] = field(default_factory=dict)
    opset: int = 13
    metadata: Mapping[str, str] = field(default_factory=dict)
    tensors: Mapping[str, TensorInfo] = field(init=False, repr=False, compare=False)
    _producers: Mapping[str, Node] = field(init=False, repr=False, compare=False)
    _readers: Mapping[str, tuple[Node, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from quantemu.graph.shapes import infer_shapes  # noqa: PLC0415 (shapes imports ir)

        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "initializers", _freeze_initializers(self.initializers))
        object.__setattr__(self, "quant_overrides", MappingProxyType(dict(self.quant_overrides)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        _check_structure(self)
        object.__setattr__(self, "tensors", MappingProxyType(infer_shapes(self)))
        producers: dict[str, Node] = {}
        readers: dict[str, list[Node]] = {}
        for node in self.nodes:
            producers.update((name, node) for name in node.outputs)
            for name in dict.fromkeys(node.inputs):
                readers.setdefault(name, []).append(node)
        object.__setattr__(self, "_producers", producers)
        object.__setattr__(self, "_readers", {k: tuple(v) for k, v in readers.items()})

    # -- navigation -------------------------------------------------------------------------

    @property
    def input_names(self) -> tuple[str, ...]:
        """The graph inputs' names, in order."""
        return tuple(t.name for t in self.inputs)

    @property
    def output_infos(self) -> tuple[TensorInfo, ...]:
        """The graph outputs' shapes and dtypes, in order."""
        return tuple(self.tensors[name] for name in self.outputs)

    def producer(self, tensor: str) -> Node | None:
        """The node that computes ``tensor`` (``None`` for inputs and initializers)."""
        return self._producers.get(tensor)

    def consumers(self, tensor: str) -> tuple[Node, ...]:
        """The nodes that read ``tensor``, in graph order."""
        return self._readers.get(tensor, ())

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise InvalidInputError(
            f"graph {self.name!r} has no node named {name!r}; "
            f"nodes: {', '.join(n.name for n in self.nodes[:20])}"
            + (" ..." if len(self.nodes) > 20 else "")
        )

    def param_count(self, node: Node) -> int:
        """The number of initializer elements ``node`` reads (its weights and biases)."""
        return sum(
            int(self.initializers[name].size) for name in node.inputs if name in self.initializers
        )

    # -- building new graphs ----------------------------------------------------------------

    def replace(self, **changes: Any) -> Graph:
        """A new graph with fields changed; structure and shapes are checked again.

        Initializers no node reads any more are dropped, and so are overrides of tensors that no
        longer exist.
        """
        graph = dataclasses.replace(self, **changes)
        used = {name for node in graph.nodes for name in node.inputs} | set(graph.outputs)
        initializers = {k: v for k, v in graph.initializers.items() if k in used}
        alive = used | {o for node in graph.nodes for o in node.outputs} | set(graph.input_names)
        overrides = {k: v for k, v in graph.quant_overrides.items() if k in alive}
        if len(initializers) == len(graph.initializers) and len(overrides) == len(
            graph.quant_overrides
        ):
            return graph
        return dataclasses.replace(graph, initializers=initializers, quant_overrides=overrides)

    def with_batch(self, batch: int) -> Graph:
        """A copy whose symbolic leading input dimensions are bound to ``batch``."""
        if not isinstance(batch, int | np.integer) or isinstance(batch, bool) or batch < 1:
            raise InvalidInputError(f"batch must be a positive integer, got {batch!r}")
        inputs = tuple(
            TensorInfo(t.name, (int(batch), *t.shape[1:]) if t.shape else t.shape, t.dtype)
            if t.shape and not isinstance(t.shape[0], int)
            else t
            for t in self.inputs
        )
        return self.replace(inputs=inputs)

    def with_input_shapes(self, shapes: Mapping[str, Sequence[Dim]]) -> Graph:
        """A copy with the named inputs' dimensions bound: ``{name: (d0, d1, ...)}``.

        Each given dimension must be a positive int, or ``None`` / a name to keep that
        dimension as it is (so ``(None, 3, 224, 224)`` binds all but the batch). A fixed
        dimension the model declares cannot be changed. Shapes are inferred again, so a binding
        the model cannot take is an error naming the node.
        """
        known = {t.name: t for t in self.inputs}
        unknown = sorted(set(shapes) - set(known))
        if unknown:
            raise InvalidInputError(
                f"no graph input named {', '.join(map(repr, unknown))}; inputs: {', '.join(known)}"
            )
        inputs = []
        for info in self.inputs:
            if info.name not in shapes:
                inputs.append(info)
                continue
            inputs.append(TensorInfo(info.name, _bound(info, shapes[info.name]), info.dtype))
        return self.replace(inputs=tuple(inputs))

    # -- running and printing ---------------------------------------------------------------

    def run_float(self, inputs: Inputs, *, intermediates: bool = False) -> dict[str, np.ndarray]:
        """Run the float32 reference executor; see :func:`quantemu.graph.executor.run_float`."""
        return _EXECUTORS["float"](self, inputs, intermediates=intermediates)

    def summary(self, *, width: int = 120) -> str:
        """The per-node table that ``quantemu inspect`` prints, as text."""
        from quantemu.graph.summary import summary_text  # noqa: PLC0415 (imports ir, and rich)

        return summary_text(self, width=width)

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        return f"Graph {self.name!r} ({len(self.nodes)} nodes, opset {self.opset}; inputs {ins})"


def _bound(info: TensorInfo, shape: Sequence[Dim | None]) -> Shape:
    """``info``'s shape with the dimensions of ``shape`` bound (see with_input_shapes)."""
    if len(shape) != info.rank:
        raise InvalidInputError(
            f"input {info.name!r} has rank {info.rank} ({format_shape(info.shape)}); "
            f"got {len(shape)} dimensions ({'x'.join(str(d) for d in shape)})"
        )
    out: list[Dim] = []
    for have, want in zip(info.shape, shape, strict=True):
        if want is None or isinstance(want, str):
            out.append(have)
            continue
        if isinstance(want, bool) or not isinstance(want, int | np.integer) or want < 1:
            raise InvalidInputError(f"input {info.name!r}: dimension {want!r} is not positive")
        if isinstance(have, int) and have != want:
            raise InvalidInputError(
                f"input {info.name!r} has the fixed shape {format_shape(info.shape)}; "
                f"it cannot become {'x'.join(str(d) for d in shape)}"
            )
        out.append(int(want))
    return tuple(out)


def format_shape(shape: Shape) -> str:
    """``(1, 3, 224, 224)`` as ``1x3x224x224``; a scalar as ``scalar``."""
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _check_structure(graph: Graph) -> None:
    """Unique names, every input defined earlier, outputs produced: the topological invariant."""
    defined = _defined_before_nodes(graph)
    node_names: set[str] = set()
    for node in graph.nodes:
        if node.name in node_names:
            raise InvalidInputError(f"two nodes are named {node.name!r}; node names must be unique")
        node_names.add(node.name)
        for name in node.inputs:
            if name and name not in defined:
                raise InvalidInputError(
                    f"{node} reads {name!r}, which is not a graph input, an initializer, or the "
                    "output of an earlier node (a dangling input, or nodes out of order)"
                )
        for name in node.outputs:
            if name and name in defined:
                raise InvalidInputError(f"{node} writes {name!r}, which is already defined")
            defined.add(name)
    for name in graph.outputs:
        if name not in defined:
            raise InvalidInputError(f"graph output {name!r} is not produced by any node")


def _defined_before_nodes(graph: Graph) -> set[str]:
    """The names of the graph inputs and initializers (checked to be unique)."""
    defined: set[str] = set()
    for info in graph.inputs:
        if info.name in defined or not info.name:
            raise InvalidInputError(f"graph input name {info.name!r} is empty or repeated")
        defined.add(info.name)
    for name in graph.initializers:
        if name in defined:
            raise InvalidInputError(f"initializer {name!r} has the name of a graph input")
        defined.add(name)
    return defined
