"""Which backend runs which operator of a model: the table of ``quantemu inspect --support``.

Each backend lowers the whole (optimized) graph with its default options; every node is then
``exact`` (an integer layer the emulation reproduces bit for bit), ``inexact`` (an integer layer
that is not bit-exact), ``float`` (a float-fallback layer), ``unsupported`` (the backend cannot
run it, or the importer could not import it), ``fused`` (no layer of its own: the backend
folded it into a neighbour) or ``?`` (not tried: it follows a node the backend cannot run).
A row is one op type; its cell is the worst state of its nodes, with the count when the nodes
differ. A backend that fails as a whole gets its error instead.

Lowering needs calibration ranges. They are derived cheaply: a fully quantized model's own; else
two random samples through the float graph (nodes it cannot run, such as the importer's
``Unsupported`` ones, and what follows them get a placeholder range of [-1, 1]). The states do
not depend on the ranges' values, only on the ops and shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu.backends.registry import backend_spec, backend_specs, known_backends
from quantemu.calibration.from_model import is_fully_quantized, ranges_from_model
from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.graph import optimize
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Graph, Node
from quantemu.graph.ops.unsupported import UNSUPPORTED
from quantemu.program.fallback import FloatFallbackLayer
from quantemu.program.lowering import LoweringFailed
from quantemu.simulate.plan import BackendPlan, RangeSource, typed_options

#: Node states, best first (a row shows its worst node's state).
STATES = ("exact", "inexact", "fused", "float", "?", "unsupported")

#: The samples fed through the float graph to derive ranges.
SAMPLES = 2


@dataclass(frozen=True)
class SupportTable:
    """Per op type and backend, the state of the op's nodes (see the module docstring).

    ``states[backend][node name]``: each node's state; ``errors[backend]``: why a backend failed
    as a whole; ``ranges``: how the ranges were derived.
    """

    graph: Graph
    backends: tuple[str, ...]
    states: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    ranges: str = ""

    def op_types(self) -> list[str]:
        """The rows: op types in order of first appearance (ONNX names for unimported nodes)."""
        return list(dict.fromkeys(op_type(node) for node in self.graph.nodes))

    def cell(self, op: str, backend: str) -> str:
        """``exact``, ``float``, ...; ``float (2/5)`` when only some nodes are in that state."""
        if backend in self.errors:
            return "error"
        nodes = [n.name for n in self.graph.nodes if op_type(n) == op]
        states = [self.states[backend].get(name, "fused") for name in nodes]
        worst = max(states, key=STATES.index)
        count = states.count(worst)
        return worst if count == len(states) else f"{worst} ({count}/{len(states)})"


def op_type(node: Node) -> str:
    """The node's op type; the ONNX op type of a node the importer kept opaque."""
    return node.attrs["onnx_op"] if node.op_type == UNSUPPORTED else node.op_type


def support_table(graph: Graph, backends: Sequence[str] | None = None) -> SupportTable:
    """Optimize ``graph`` (as imported, possibly with ``Unsupported`` nodes) as a run does, lower
    it on each backend and record every node's state."""
    graph = optimize(graph)
    names = tuple(known_backends() if backends is None else backends)
    ranges, how = cheap_ranges(graph)
    table = SupportTable(graph, names, ranges=how)
    for name in names:
        try:
            table.states[name] = _backend_states(graph, ranges, name)
        except QuantemuError as exc:
            table.errors[name] = str(exc)
        except Exception as exc:
            table.errors[name] = f"{type(exc).__name__}: {exc}"
    return table


def _backend_states(graph: Graph, ranges: Any, backend: str) -> dict[str, str]:
    """Lower ``graph`` through ``backend``'s plan with its default options and sampled ranges
    (the ranges of the graph as the toolchain rewrites it, where it does)."""
    options = typed_options(backend, None)
    seen = backend_spec(backend).prepared(graph, options)
    if seen is not graph:  # the toolchain writes some nodes out of others
        ranges = cheap_ranges(seen)[0]
    plan = BackendPlan(backend, options, seen, ranges, RangeSource.SAMPLED)
    states = {n.name: "unsupported" for n in graph.nodes if n.op_type == UNSUPPORTED}
    try:
        layers = plan.lower().lowered.layers
    except LoweringFailed as exc:
        layers = exc.layers
        states.update((node.name, "unsupported") for node, _ in exc.failures)
        states.update((name, "?") for name in exc.skipped)
    for layer in layers:
        state = _layer_state(layer)
        previous = states.get(layer.name, "exact")
        states[layer.name] = max(previous, state, key=STATES.index)
    return _onto(graph, states)


def _onto(graph: Graph, states: dict[str, str]) -> dict[str, str]:
    """States of a prepared graph's nodes onto the original nodes they were written out of
    (``NAME/part`` belongs to ``NAME``): each original node takes its parts' worst state."""
    names = {n.name for n in graph.nodes}
    out: dict[str, str] = {}
    for name, state in states.items():
        owner = name if name in names else name.rpartition("/")[0]
        if owner not in names:
            owner = name
        out[owner] = max(out.get(owner, "exact"), state, key=STATES.index)
    return out


def _layer_state(layer: Any) -> str:
    if isinstance(layer, FloatFallbackLayer) or str(layer.op).startswith("float:"):
        return "float"
    return "exact" if layer.exact else "inexact"


def cheap_ranges(graph: Graph) -> tuple[CalibrationRanges, str]:
    """Calibration ranges good enough to lower every node, and how they were derived."""
    if is_fully_quantized(graph):
        return ranges_from_model(graph), "the model's own quantization"
    observed = _observe(graph)
    tensors = {}
    for name in [*graph.input_names, *(o for n in graph.nodes for o in n.outputs if o)]:
        value = observed.get(name)
        if value is None or not value.size or not np.isfinite(value).all():
            tensors[name] = TensorRange(-1.0, 1.0)
        else:
            tensors[name] = TensorRange(float(value.min()), float(value.max()))
    placeholder = len(tensors) - sum(1 for name in tensors if name in observed)
    how = f"{SAMPLES} random samples" + (
        f" ({placeholder} tensors with a placeholder range)" if placeholder else ""
    )
    ranges = CalibrationRanges(tensors=tensors, observer="minmax", samples=SAMPLES)
    return ranges, how


def _observe(graph: Graph) -> dict[str, np.ndarray]:
    """Every value two random samples give, running each node that can run."""
    rng = np.random.default_rng(0)
    values: dict[str, np.ndarray] = {}
    for info in graph.inputs:
        shape = [
            SAMPLES if i == 0 and not isinstance(d, int) else d for i, d in enumerate(info.shape)
        ]
        if not all(isinstance(d, int) for d in shape):
            return {}  # a symbolic inner dimension: every range is a placeholder
        values[info.name] = rng.standard_normal(shape).astype(np.float32)
    known = {**graph.initializers, **values}
    for node in graph.nodes:
        if node.op_type == UNSUPPORTED or any(n and n not in known for n in node.inputs):
            continue
        try:
            outputs = run_node(node, [known[n] if n else None for n in node.inputs])
        except Exception:
            continue
        for name, value in zip(node.outputs, outputs, strict=False):
            known[name] = values[name] = np.asarray(value, dtype=np.float32)
    return values


def lint_findings(graph: Graph, backend: str) -> list[Any]:
    """``backend``'s model-constraints lint of ``graph`` optimized as a run optimizes it (a
    list of findings with ``severity``, ``node``, ``rule``, ``message`` and ``advice``)."""
    lint = backend_spec(backend).lint
    if lint is None:
        with_lint = [s.name for s in backend_specs() if s.lint is not None]
        raise InvalidInputError(
            f"{backend} has no model-constraints lint; backends with one: "
            f"{', '.join(with_lint) or 'none'}"
        )
    return list(lint(optimize(graph)))
