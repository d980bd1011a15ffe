"""Import-time rewrites before normalization: shape sub-graphs fold to constants, Split becomes
one Slice per output.

The float graph has no integer tensors, so every node computing integers from constants (Shape of
a static tensor, then Gather, Unsqueeze, Concat, Cast...) is evaluated here with ONNX's
reference implementation and its outputs become constants, which the following normalizers read
as attribute-like inputs (a Reshape target, say).

A Shape whose only symbolic entry is one dimension ``N`` (the batch, typically) gives a *derived*
value: the sub-graph is evaluated twice, with ``N`` set to two different probe sizes, and entries
that differ depend on ``N``. Where such a value reaches a Reshape target, an entry equal to ``N``
in both runs becomes ``0`` (copy) when the Reshape input has ``N`` at that position, or ``-1``
(infer) when the element counts prove that ``-1`` infers ``N``. Anything else that depends on
``N`` is refused, naming the node.
"""

from __future__ import annotations

import numpy as np
from onnx import defs, helper
from onnx.reference import ReferenceEvaluator

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import UNKNOWN_DIM, TensorInfo
from quantemu.graph.onnx_attrs import BIND_HINT, NORMALIZERS, Context, RawNode, check_reviewed
from quantemu.graph.ops._spec import known

#: The two sizes a symbolic dimension takes when a derived value is evaluated (primes, so that
#: an entry computed from N rarely equals N by chance in both runs).
PROBES = (1009, 1013)

#: Ops through which a derived value is followed: cheap integer arithmetic on shape vectors.
DERIVED_OPS = frozenset(
    [
        "Abs",
        "Add",
        "Cast",
        "Concat",
        "Div",
        "Equal",
        "Flatten",
        "Gather",
        "Identity",
        "Max",
        "Min",
        "Mul",
        "Neg",
        "Reshape",
        "Slice",
        "Squeeze",
        "Sub",
        "Unsqueeze",
        "Where",
    ]
)
_DEFAULT = ("", "ai.onnx")


def rewrite_raw(raw: RawNode, ctx: Context) -> list[RawNode]:
    """The raw nodes to normalize in place of ``raw``: none when it folded into constants."""
    if raw.domain not in _DEFAULT:
        return [raw]
    if raw.op_type in ("Shape", "Size"):
        _fold_shape(raw, ctx)
        return []
    if raw.op_type == "Split":
        return _split(raw, ctx)
    names = [n for n in raw.inputs if n]
    derived = [n for n in names if n in ctx.derived]
    if raw.op_type == "Reshape" and derived == names[1:2] and names[0] not in ctx.consts:
        return [_static_reshape(raw, ctx)]
    available = names and all(n in ctx.consts or n in ctx.derived for n in names)
    # Integer results (shape vectors) and ops the float graph has no kernel for (Cast, Range,
    # ConstantOfShape, Equal...) are computed here; float ops on weights stay for the passes.
    computed = (raw.op_type not in NORMALIZERS and defs.has(raw.op_type)) or any(
        ctx.consts[n].dtype.kind != "f" for n in names if n in ctx.consts
    )
    if available and (derived or computed):
        _fold(raw, ctx, derived)
        return []
    if derived:
        raise UnsupportedError(
            f"{raw}: input {derived[0]!r} is computed from the symbolic dimension "
            f"{ctx.derived[derived[0]][0]!r}; quantemu folds such values only into a Reshape "
            f"target; {BIND_HINT}"
        )
    return [raw]


def _store(ctx: Context, name: str, value: np.ndarray) -> None:
    value = np.asarray(value)
    if value.dtype.kind == "f" and value.dtype != np.float32:
        value = value.astype(np.float32)
    ctx.consts[name] = value
    ctx.tensors[name] = TensorInfo(name, value.shape, value.dtype.name)


def _derive(ctx: Context, name: str, symbol: str, first, second) -> None:
    ctx.derived[name] = (symbol, first, second)
    ctx.tensors[name] = TensorInfo(name, first.shape, first.dtype.name)


def _fold_shape(raw: RawNode, ctx: Context) -> None:
    shape = ctx.info(raw).shape
    if raw.op_type == "Shape":
        rank = len(shape)
        start, end = int(raw.attrs.get("start", 0)), int(raw.attrs.get("end", rank))
        start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
        shape = shape[start:end]
    symbols = sorted({d for d in shape if not known(d)})
    if UNKNOWN_DIM in symbols or len(symbols) > 1:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} of a tensor of shape {shape} is not static; quantemu folds "
            f"shape computations with at most one symbolic dimension (the batch); {BIND_HINT}"
        )
    runs = [[p if not known(d) else d for d in shape] for p in PROBES[: 1 + len(symbols)]]
    values = [
        np.array(r if raw.op_type == "Shape" else int(np.prod(r)), dtype=np.int64) for r in runs
    ]
    if symbols:
        _derive(ctx, raw.outputs[0], symbols[0], values[0], values[1])
    else:
        _store(ctx, raw.outputs[0], values[0])


def _evaluate(raw: RawNode, ctx: Context, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    attrs = {k: v for k, v in raw.attrs.items() if not (isinstance(v, list) and not v)}
    node = helper.make_node(raw.op_type, list(raw.inputs), list(raw.outputs), **attrs)
    # A one-node model carries the model's opset: given a bare node, the reference evaluator
    # runs the newest version of the op (Unsqueeze-13 reads axes from an input, not -11's
    # attribute).
    model = helper.make_model(
        helper.make_graph(
            [node],
            "fold",
            [helper.make_empty_tensor_value_info(n) for n in dict.fromkeys(raw.inputs) if n],
            [helper.make_empty_tensor_value_info(n) for n in raw.outputs if n],
        ),
        opset_imports=[helper.make_opsetid("", ctx.opset)],
    )
    try:
        values = list(ReferenceEvaluator(model).run(None, feeds))
    except Exception as exc:  # the reference implementation's own errors, on constants
        raise InvalidInputError(
            f"{raw}: cannot evaluate this node of constant inputs ({type(exc).__name__}: {exc})"
        ) from exc
    # Sequences, optionals and strings have no place in the float graph.
    if not all(isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for v in values):
        raise UnsupportedError(
            f"{raw}: its constant inputs give a value that is not a numeric tensor "
            f"({', '.join(type(v).__name__ for v in values)}); quantemu imports tensor graphs"
        )
    return values


def _fold(raw: RawNode, ctx: Context, derived: list[str]) -> None:
    names = [n for n in raw.inputs if n]
    if not derived:
        for name, value in zip(raw.outputs, _evaluate(raw, ctx, {n: ctx.consts[n] for n in names}),
                               strict=False):  # fmt: skip
            _store(ctx, name, value)
        return
    symbols = {ctx.derived[n][0] for n in derived}
    if raw.op_type not in DERIVED_OPS or len(symbols) > 1:
        raise UnsupportedError(
            f"{raw}: computes from the symbolic dimension(s) {sorted(symbols)}, which quantemu "
            f"follows only through {', '.join(sorted(DERIVED_OPS))} into a Reshape target; "
            f"{BIND_HINT}"
        )
    runs = []
    for k in (1, 2):
        feeds = {n: ctx.derived[n][k] if n in ctx.derived else ctx.consts[n] for n in names}
        runs.append(_evaluate(raw, ctx, feeds))
    (symbol,) = symbols
    for name, first, second in zip(raw.outputs, *runs, strict=False):
        if np.array_equal(first, second):
            _store(ctx, name, first)
        else:
            _derive(ctx, name, symbol, np.asarray(first), np.asarray(second))


def _static_reshape(raw: RawNode, ctx: Context) -> RawNode:
    """A Reshape whose target depends on one symbolic dimension, with that entry as 0 or -1."""
    symbol, first, second = ctx.derived[raw.inputs[1]]
    in_shape = ctx.info(raw).shape
    allowzero = int(raw.attrs.get("allowzero", 0))
    target: list[int | None] = []
    for i, (a, b) in enumerate(zip(first.reshape(-1), second.reshape(-1), strict=True)):
        if a == b:
            target.append(int(a))
        elif (a, b) != PROBES:
            raise _unprovable(raw, symbol, "an entry computed from it is not the dimension itself")
        elif not allowzero and i < len(in_shape) and in_shape[i] == symbol:
            target.append(0)
        else:
            target.append(None)
    if None in target:
        target[target.index(None)] = _infer_entry(raw, symbol, in_shape, target, allowzero)
    name = f"{raw.name}/static_shape"
    _store(ctx, name, np.array(target, dtype=np.int64))
    return RawNode(raw.name, raw.op_type, raw.domain, (raw.inputs[0], name), raw.outputs, raw.attrs)


def _infer_entry(raw, symbol, in_shape, target, allowzero) -> int:
    """-1 is provably the dimension when it is the input's only symbolic one, the target has no
    other unknown, and the remaining entries hold exactly the input's other elements."""
    others = [t for t in target if t is not None]
    symbolic = [d for d in in_shape if not known(d)]
    if (
        target.count(None) > 1
        or -1 in others
        or symbolic != [symbol]
        or (allowzero and 0 in others)
    ):
        raise _unprovable(raw, symbol, "no single 0 or -1 entry provably stands for it")
    copied = [in_shape[i] if t == 0 else t for i, t in enumerate(target) if t is not None]
    if not all(known(d) for d in copied) or int(np.prod(copied)) != int(
        np.prod([d for d in in_shape if known(d)])
    ):
        raise _unprovable(raw, symbol, "the element counts do not prove that -1 infers it")
    return -1


def _unprovable(raw: RawNode, symbol: str, why: str) -> UnsupportedError:
    return UnsupportedError(
        f"{raw}: the target shape depends on the symbolic dimension {symbol!r} and {why}; "
        f"{BIND_HINT}"
    )


# -- Split -> Slice ------------------------------------------------------------------------------


def _split_sizes(raw: RawNode, ctx: Context, dim, count: int) -> list[int]:
    if ctx.opset < 13:
        sizes = raw.attrs.get("split")
    else:
        value = ctx.const(raw, 1, "split")
        sizes = None if value is None else value.reshape(-1).tolist()
    if sizes:
        sizes = [int(s) for s in sizes]
        if len(sizes) != count or min(sizes) < 0 or (known(dim) and sum(sizes) != dim):
            raise InvalidInputError(f"{raw}: split {sizes} does not cut size {dim} in {count}")
        return sizes
    if not known(dim):
        raise UnsupportedError(
            f"{raw}: an even Split of an axis of symbolic size {dim!r}; give the split sizes or "
            f"{BIND_HINT}"
        )
    if "num_outputs" in raw.attrs:
        chunk = -(-dim // int(raw.attrs["num_outputs"]))
        sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    elif dim % count == 0:
        sizes = [dim // count] * count
    else:
        raise InvalidInputError(f"{raw}: size {dim} does not split evenly in {count}")
    if min(sizes) < 0:
        raise InvalidInputError(f"{raw}: size {dim} does not split in {count} parts")
    return sizes


def _split(raw: RawNode, ctx: Context) -> list[RawNode]:
    check_reviewed(raw, ctx.opset)
    allowed = {"axis", "split"} if ctx.opset < 13 else {"axis", "num_outputs"}
    unknown = sorted(set(raw.attrs) - allowed)
    if unknown:
        raise UnsupportedError(f"{raw}: attributes {unknown} are not supported for Split")
    shape = ctx.info(raw).shape
    axis = int(raw.attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        raise InvalidInputError(f"{raw}: axis {axis} is out of range for shape {shape}")
    axis %= len(shape)
    sizes = _split_sizes(raw, ctx, shape[axis], len(raw.outputs))
    slices, start = [], 0
    for k, (out, size) in enumerate(zip(raw.outputs, sizes, strict=True)):
        bounds = {"starts": [start], "ends": [start + size], "axes": [axis]}
        start += size
        if not out:
            continue
        name = f"{raw.name}/slice{k}"
        if ctx.opset < 10:
            slices.append(RawNode(name, "Slice", raw.domain, raw.inputs[:1], (out,), bounds))
            continue
        inputs = [raw.inputs[0]]
        for role, value in bounds.items():
            inputs.append(f"{name}/{role}")
            _store(ctx, inputs[-1], np.array(value, dtype=np.int64))
        slices.append(RawNode(name, "Slice", raw.domain, tuple(inputs), (out,), {}))
    return slices
