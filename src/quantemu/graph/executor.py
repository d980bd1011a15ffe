"""The float32 reference executor: runs a :class:`~quantemu.graph.Graph` with NumPy.

Every op has one vectorized kernel (:mod:`quantemu.graph.ops`); the executor walks the nodes in
their (topological) order, frees each value after its last reader unless asked to keep all of
them, and returns the graph outputs (or every value, for per-layer references).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.graph.ir import Inputs, format_shape, install_float_executor
from quantemu.graph.ops import spec
from quantemu.graph.passes_shape import fixed_batch, relax_batch

if TYPE_CHECKING:
    from quantemu.graph.ir import Graph, Node


def bind_inputs(graph: Graph, inputs: Inputs) -> dict[str, np.ndarray]:
    """Match ``inputs`` to the graph inputs, checking shapes; values become float32 arrays.

    ``inputs`` is one array (for a single-input graph), a sequence in input order, or a mapping
    by input name. Symbolic dimensions (the batch) accept any size.
    """
    names = graph.input_names
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        extra = [n for n in inputs if n not in names]
        if missing or extra:
            raise InvalidInputError(
                f"graph {graph.name!r} takes inputs {list(names)}; missing {missing}, unknown "
                f"{extra}"
            )
        values = [inputs[n] for n in names]
    elif isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
        values = [inputs]
    else:
        values = list(inputs)
    if len(values) != len(names):
        raise InvalidInputError(
            f"graph {graph.name!r} takes {len(names)} inputs ({', '.join(names)}), "
            f"got {len(values)}"
        )
    return {info.name: _check_input(info, v) for info, v in zip(graph.inputs, values, strict=True)}


def _check_input(info, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise InvalidInputError(
            f"input {info.name!r} must be a float array, got dtype {array.dtype}; convert (and "
            "normalize) the data the way the model was trained, e.g. x.astype(np.float32) / 255"
        )
    ok = array.ndim == len(info.shape) and all(
        not isinstance(d, int) or d == s for d, s in zip(info.shape, array.shape, strict=True)
    )
    if not ok:
        raise InvalidInputError(
            f"input {info.name!r} has shape {format_shape(array.shape)}, the model expects "
            f"{format_shape(info.shape)} (named dimensions may take any size)"
        )
    return np.asarray(array, dtype=np.float32, order="C")  # ascontiguousarray makes 0-d 1-d


def iter_float(graph: Graph, inputs: Inputs) -> Iterator[tuple[Node, dict[str, np.ndarray]]]:
    """Run node by node, yielding each node with its output values (freed after their use)."""
    values: dict[str, np.ndarray] = dict(graph.initializers)
    values.update(bind_inputs(graph, inputs))
    last_use = _last_use(graph)
    keep = set(graph.outputs) | set(graph.initializers)
    for index, node in enumerate(graph.nodes):
        args = [values[name] if name else None for name in node.inputs]
        results = run_node(node, args)
        produced = dict(zip(node.outputs, results, strict=False))
        values.update(produced)
        yield node, produced
        for name in node.inputs:
            if name and last_use.get(name) == index and name not in keep:
                values.pop(name, None)


def run_node(node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run one node's kernel on its input arrays."""
    kernel = spec(node.op_type, where=str(node))
    try:
        with np.errstate(all="ignore"):  # inf/nan propagate as in onnxruntime, without warnings
            return list(kernel.run(node.attrs, args))
    except QuantemuError:
        raise
    except MemoryError as exc:  # NumPy raises it before allocating, so we can still report it
        raise InvalidInputError(
            f"{node} needs more memory than is available ({exc}); check the node's attributes "
            "(pads, shapes) for implausible sizes, or run fewer samples at a time"
        ) from exc
    except (ValueError, IndexError, TypeError) as exc:
        # Import-time inference checks every known dimension; what is left are dimensions the
        # model leaves unknown ("?"), which the data fixed to sizes this node cannot take.
        shapes = ", ".join(format_shape(a.shape) if a is not None else "-" for a in args)
        raise InvalidInputError(
            f"{node} cannot run on inputs of shapes {shapes} ({type(exc).__name__}: {exc}); "
            "where the model leaves dimensions unknown ('?'), give inputs of the sizes it was "
            "exported for, or fix the model's input shapes (--input-shape)"
        ) from exc


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            last[name] = index
    return last


def run_float(
    graph: Graph, inputs: Inputs, *, intermediates: bool = False
) -> dict[str, np.ndarray]:
    """Run ``graph`` in float32 on ``inputs``; returns ``{output name: array}``.

    With ``intermediates=True`` the result holds every value the graph computes (inputs and
    every node output, by tensor name), e.g. as per-layer float references.

    A model exported with a fixed batch of 1 takes any number of samples, as
    ``quantemu.compile`` does: the batch is relaxed where :func:`relax_batch` proves that changes
    no sample's result, and otherwise the samples run one at a time (:func:`_run_batch_one`).
    """
    samples = _samples_beyond_batch_one(graph, inputs)
    if samples is not None:
        return _run_batch_one(graph, inputs, samples, intermediates=intermediates)
    return _run_bound(graph, inputs, intermediates=intermediates)


def _run_bound(graph: Graph, inputs: Inputs, *, intermediates: bool) -> dict[str, np.ndarray]:
    bound = bind_inputs(graph, inputs)
    result: dict[str, np.ndarray] = dict(bound) if intermediates else {}
    for _node, produced in iter_float(graph, bound):
        if intermediates:
            result.update(produced)
        else:
            result.update({k: v for k, v in produced.items() if k in graph.outputs})
    for name in graph.outputs:  # an output may be an input or an initializer
        if name not in result:
            result[name] = bound.get(name, graph.initializers.get(name))
    if not intermediates:
        return {name: result[name] for name in graph.outputs}
    return result


# -- a fixed batch of 1 given several samples -----------------------------------------------------

#: Each batch-1 graph's relaxed form (or the graph itself where the batch cannot be relaxed),
#: made once per graph object: relax_batch checks itself by running the graph.
_RELAXED: dict[int, tuple[weakref.ref, Graph]] = {}


def _samples_beyond_batch_one(graph: Graph, inputs: Inputs) -> int | None:
    """The number of samples when a fixed-batch-1 graph gets another number of them (the same
    in every input, each input otherwise of its shape); ``None`` when ``inputs`` is no such
    case (bind_inputs then checks it as it is)."""
    if fixed_batch(graph) != 1:
        return None
    try:
        values = _as_list(graph, inputs)
    except InvalidInputError:
        return None
    arrays = [np.asarray(v) for v in values]
    counts = {a.shape[0] for a in arrays if a.ndim}
    if len(counts) != 1 or len(arrays) != len(graph.inputs):
        return None
    (count,) = counts
    if count == 1 or any(a.ndim != info.rank for a, info in zip(arrays, graph.inputs, strict=True)):
        return None
    return count


def _as_list(graph: Graph, inputs: Inputs) -> list:
    if isinstance(inputs, Mapping):
        if set(inputs) != set(graph.input_names):
            raise InvalidInputError("inputs do not name the graph inputs")
        return [inputs[n] for n in graph.input_names]
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
        return [inputs]
    return list(inputs)


def _relaxed(graph: Graph) -> Graph:
    key = id(graph)
    cached = _RELAXED.get(key)
    if cached is not None and cached[0]() is graph:
        return cached[1]
    relaxed = relax_batch(graph)
    # the callback holds the cache itself: at interpreter exit the module global is None
    forget = functools.partial(_RELAXED.pop, key, None)
    _RELAXED[key] = (weakref.ref(graph, lambda _ref: forget()), relaxed)
    return relaxed


def _run_batch_one(
    graph: Graph, inputs: Inputs, samples: int, *, intermediates: bool
) -> dict[str, np.ndarray]:
    """``samples`` samples through a batch-1 graph: all at once where the batch relaxes, else
    one sample at a time (each exactly as the model was exported), stacked on the batch axis."""
    relaxed = _relaxed(graph)
    values = dict(zip(graph.input_names, _as_list(graph, inputs), strict=True))
    if fixed_batch(relaxed) is None:
        return _run_bound(relaxed, values, intermediates=intermediates)
    if samples == 0:
        raise InvalidInputError(
            f"graph {graph.name!r} has a fixed batch of 1 that cannot be relaxed; give at "
            "least one sample"
        )
    runs = [
        _run_bound(
            graph,
            {n: np.asarray(v)[k : k + 1] for n, v in values.items()},
            intermediates=intermediates,
        )
        for k in range(samples)
    ]
    return {name: _stack(graph, name, [run[name] for run in runs]) for name in runs[0]}


def _stack(graph: Graph, name: str, per_sample: list[np.ndarray]) -> np.ndarray:
    """One value's per-sample results on the batch axis; a value that does not carry the batch
    (a shape computed from the input, say) is kept when every sample gives the same."""
    first = per_sample[0]
    if first.ndim and first.shape[0] == 1:
        return np.concatenate(per_sample, axis=0)
    if all(np.array_equal(first, other) for other in per_sample[1:]):
        return first
    raise InvalidInputError(
        f"graph {graph.name!r} has a fixed batch of 1 that cannot be relaxed, and its value "
        f"{name!r} of shape {format_shape(first.shape)} does not carry the batch, so the "
        "samples' results cannot be stacked; run one sample at a time"
    )


install_float_executor(run_float)
