"""The lowering framework every backend shares: context, rule table, one driver loop.

A backend lowers a graph with three things of its own, and this module's machinery:

- its options, a :class:`~quantemu.program.options.LoweringOptions` subclass;
- its context, a :class:`LoweringContext` subclass holding what its rules share (how it
  derives the encoding of a tensor, for instance);
- its rules: one function ``rule(ctx, node) -> Layer`` per graph op type, gathered in a
  :class:`RuleTable` with the float-fallback builder and the ops that fall back by design.

A rule that finds a node it cannot lower raises :class:`NotLowerable` with the reason. The table
then builds the backend's float-fallback layer (or raises
:class:`~quantemu.errors.UnsupportedError` where the backend or its options allow none). An op
with no rule and no fallback is an ``UnsupportedError`` that lists the supported ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Graph, Node
from quantemu.graph.ops.unsupported import UNSUPPORTED, describe
from quantemu.intmath import frozen
from quantemu.program.encoding import Encoding
from quantemu.program.layer import Layer
from quantemu.program.options import LoweringOptions

L = TypeVar("L", bound=Layer)
C = TypeVar("C", bound="LoweringContext")


class NotLowerable(Exception):
    """A node a rule cannot lower; the message says why. Internal to lowering: the rule table
    turns it into a float fallback or an :class:`~quantemu.errors.UnsupportedError`."""


@dataclass
class LoweringContext:
    """The graph being lowered, its calibrated ranges, the options, and the encodings so far.

    Subclasses add the backend's own derivations (how a tensor's encoding is chosen) and
    set :attr:`backend`.
    """

    backend: ClassVar[str] = ""

    graph: Graph
    ranges: Mapping[str, Any]
    options: LoweringOptions
    encodings: dict[str, Encoding] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A subclass checks what it was given here (the options it reads, say)."""

    def const(self, name: str) -> np.ndarray | None:
        """The initializer ``name``, or None for a run-time tensor (or an absent input)."""
        return self.graph.initializers.get(name) if name else None

    def constant(self, node: Node, index: int, role: str) -> np.ndarray:
        """Initializer input ``index`` of ``node`` as float32, else :class:`NotLowerable`."""
        name = node.inputs[index] if index < len(node.inputs) else ""
        value = self.const(name)
        if value is None:
            raise NotLowerable(f"the {role} ({name or 'absent'}) is not a constant initializer")
        return np.asarray(value, dtype=np.float32)

    def data_inputs(self, node: Node) -> tuple[str, ...]:
        """The node's run-time (non-constant, present) inputs, in order."""
        return tuple(n for n in node.inputs if n and n not in self.graph.initializers)

    def shape(self, name: str) -> tuple:
        """The inferred shape of tensor ``name`` (the batch may be symbolic)."""
        return tuple(self.graph.tensors[name].shape)

    def layer(
        self,
        cls: type[L],
        node: Node,
        /,
        *,
        op: str,
        inputs: Iterable[str] | None = None,
        exact: bool = True,
        note: str = "",
        **fields: Any,
    ) -> L:
        """A ``cls`` layer for ``node``: the one way to build a layer from a node.

        ``inputs`` defaults to the node's run-time inputs; the output is the node's (single)
        output; ``fields`` are the layer class's own parameters (``cls`` and ``node`` are
        positional-only, so a layer may have a field named ``node``).
        """
        # A lowered layer's parameters never change: read-only arrays say so, and let
        # intmath cache what it derives from weights (matmul_exact's exactness plan).
        fields = {k: frozen(v) if isinstance(v, np.ndarray) else v for k, v in fields.items()}
        return cls(
            name=node.name,
            op=op,
            inputs=tuple(self.data_inputs(node) if inputs is None else inputs),
            output=node.outputs[0],
            exact=exact,
            note=note,
            backend=self.backend,
            **fields,
        )

    def allows_fallback(self) -> bool:
        """Whether a node without an integer lowering may run as a float fallback."""
        return True

    def lowered(self, node: Node, layer: Layer) -> None:
        """Called after each node is lowered; records the layer's output encoding if it has one
        (``layer.encoding``) and none is known yet."""
        encoding = getattr(layer, "encoding", None)
        if isinstance(encoding, Encoding):
            self.encodings.setdefault(layer.output, encoding)


class LoweringFailed(UnsupportedError):
    """Nodes a backend can neither lower nor run as a float fallback, named in one message.

    ``failures``: ``(node, error)`` in graph order; ``layers``: the layers of the nodes that
    were lowered; ``skipped``: the names of nodes after a failed one that could not be tried
    (for a per-node support table).
    """

    def __init__(self, message: str, failures=(), layers=(), skipped=()) -> None:
        super().__init__(message)
        self.failures: tuple[tuple[Node, UnsupportedError], ...] = tuple(failures)
        self.layers: tuple[Layer, ...] = tuple(layers)
        self.skipped: tuple[str, ...] = tuple(skipped)

    @classmethod
    def of(cls, backend: str, failures, layers, skipped=()) -> LoweringFailed:
        """One error for ``failures``: the node's own message when there is one."""
        if len(failures) == 1:
            return cls(str(failures[0][1]), failures, layers, skipped)
        # Each message ends with the backend's supported set: the first says it, the others
        # leave it out where it is the same.
        first_tail = str(failures[0][1]).partition("; supported op")[2]
        entries = [
            (_op_type(node), node.name, _trimmed(str(exc), first_tail if i else ""))
            for i, (node, exc) in enumerate(failures)
        ]
        kinds = len({e[0] for e in entries})
        return cls(
            f"{backend or 'lowering'}: {len(failures)} nodes of {kinds} operator type(s) cannot "
            f"be lowered:\n{describe(entries)}",
            failures,
            layers,
            skipped,
        )


def _trimmed(message: str, tail: str) -> str:
    head, sep, rest = message.partition("; supported op")
    return head if tail and sep and rest == tail else message


def _op_type(node: Node) -> str:
    return node.attrs["onnx_op"] if node.op_type == UNSUPPORTED else node.op_type


Rule = Callable[[Any, Node], Layer]
Fallback = Callable[[Any, Node, str], Layer]


@dataclass(frozen=True)
class RuleTable(Generic[C]):
    """Op type -> rule, and what to do with the rest (see the module docstring).

    ``fallback(ctx, node, why)`` builds the backend's float-fallback layer; None when the
    backend has none. ``fallback_ops`` are ops without a rule that fall back by design (op ->
    why; the why may be empty). ``unsupported(ctx, node, why)`` builds the error for a node
    that can neither be lowered nor fall back (a default message otherwise). ``refused`` are
    ops the target's toolchain does not run at all (op -> why): an error even where other ops
    may fall back, since a float stand-in would report numbers no deployment produces.
    """

    rules: Mapping[str, Rule]
    fallback: Fallback | None = None
    fallback_ops: Mapping[str, str] = field(default_factory=dict)
    unsupported: Callable[[Any, Node, str], Exception] | None = None
    refused: Mapping[str, str] = field(default_factory=dict)

    def supported(self) -> list[str]:
        """Every op type this table lowers or lets fall back, sorted."""
        return sorted({*self.rules, *self.fallback_ops} - set(self.refused))

    def lower_node(self, ctx: C, node: Node) -> Layer:
        """The layer for one node: its rule, else the float fallback, else an error."""
        if node.op_type == UNSUPPORTED:  # never a float fallback: it has no float kernel
            raise UnsupportedError(
                f"{ctx.backend}: {node.attrs['onnx_op']} '{node.name}': not imported "
                f"({node.attrs['reason']})"
            )
        if node.op_type in self.refused:
            raise UnsupportedError(f"{ctx.backend}: {node}: {self.refused[node.op_type]}")
        if len(node.outputs) != 1:
            raise UnsupportedError(
                f"{ctx.backend}: {node}: operators with {len(node.outputs)} outputs are not "
                "lowered (one output per layer)"
            )
        rule = self.rules.get(node.op_type)
        try:
            if rule is None:
                if node.op_type not in self.fallback_ops:
                    raise self._unsupported(ctx, node, "")
                raise NotLowerable(self.fallback_ops[node.op_type])
            return rule(ctx, node)
        except NotLowerable as exc:
            if self.fallback is None or not ctx.allows_fallback():
                raise self._unsupported(ctx, node, str(exc)) from None
            return self.fallback(ctx, node, str(exc))

    def lower_graph(self, ctx: C) -> tuple[Layer, ...]:
        """Every node of ``ctx.graph`` in order (the driver loop).

        A node that cannot be lowered does not stop the loop: every such node is collected
        and one :class:`LoweringFailed` names them all (the first node's own error when it is
        the only one). A node after a failed one may fail for want of its input's encoding;
        that failure is a consequence, not a finding, and is left out.
        """
        layers: list[Layer] = []
        failures: list[tuple[Node, UnsupportedError]] = []
        missing: set[str] = set()  # outputs of failed nodes
        skipped: list[str] = []
        for node in ctx.graph.nodes:
            try:
                layer = self.lower_node(ctx, node)
            except UnsupportedError as exc:
                failures.append((node, exc))
                missing.update(node.outputs)
                continue
            except Exception:
                if not any(name in missing for name in node.inputs):
                    raise
                missing.update(node.outputs)
                skipped.append(node.name)
                continue
            ctx.lowered(node, layer)
            layers.append(layer)
        if failures:
            raise LoweringFailed.of(ctx.backend, failures, layers, skipped)
        return tuple(layers)

    def _unsupported(self, ctx: C, node: Node, why: str) -> Exception:
        if self.unsupported is not None:
            return self.unsupported(ctx, node, why)
        reason = f" ({why})" if why else ""
        return UnsupportedError(
            f"{ctx.backend}: {node}: operator {node.op_type!r} cannot be lowered{reason}; "
            f"supported operators: {', '.join(self.supported())}"
        )
