"""ONNX's own backend node tests through the importer and the float executor.

Each case of ``onnx.backend.test.case.node.collect_testcases`` is a one-node model (or a
function expanded into several nodes) with inputs and expected outputs. Every case is imported
with :func:`quantemu.graph.load_onnx` and run with ``graph.run_float``.

quantemu takes attribute-like inputs (shapes, axes, pads, scales, Clip bounds...) only as
constants, as exporters write them; the node tests feed them as graph inputs. The harness
turns those inputs into initializers holding the data set's values: integer inputs whose
formal parameter admits no float type, and float inputs the importer names as computed at run
time. Nothing else is changed.

A case is skipped only when the import refuses it for an operator, an attribute or value, a
non-constant attribute-like input, or an element type (quantemu computes float32 graphs: an
integer graph input, or integer arithmetic inside an expanded function) that quantemu does not
support. A refusal for the case's opset, any other error, or a wrong value fails.
"""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_models import run_ort

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx
from quantemu.graph.onnx_attrs import MAX_OPSET, MIN_OPSET, NORMALIZERS, REVIEWED
from quantemu.graph.ops.unsupported import UNSUPPORTED

RTOL, ATOL = 1e-4, 1e-5
_ONNX_RTOL, _ONNX_ATOL = 1e-3, 1e-7  # TestCase defaults: a case that keeps them asks nothing
_FLOAT_TYPES = ("tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)")
#: Cases whose expected values ONNX writes rounded, checked at ONNX's own tolerance (1e-3).
ROUNDED = {"test_averagepool_2d_ceil_last_window_starts_on_pad"}  # 4 decimals: 0.1511
#: Cases where onnxruntime, quantemu's contract, computes another value than ONNX's reference:
#: compared with onnxruntime's output instead of the case's.
ORT_DEFINED = {
    # align_corners when downsampling by scales: onnxruntime divides by the output size - 1,
    # the reference by in * scale - 1 (2.4 - 1 here)
    "test_resize_downsample_scales_linear_align_corners",
}
#: Kinds of refusal (ops.unsupported's ``kind``) a case may be skipped for.
_SKIPPABLE = {"unknown operator", "operator domain", "unsupported attribute or value"}


@functools.cache
def _cases() -> dict[str, object]:
    from onnx.backend.test.case.node import collect_testcases  # 4 s: only when tests run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own overflow/divide warnings
        return {case.name: case for case in collect_testcases(None)}


class Skip(Exception):
    """The import refused the case for something quantemu does not support."""


@dataclass(frozen=True)
class Outcome:
    status: str  # "pass", "skip" or "fail"
    reason: str = ""


def _attribute_like(model, name: str) -> bool:
    """Whether every consumer of ``name`` takes it through a parameter with no float type."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return False
    found = False
    for node in model.graph.node:
        for index, used in enumerate(node.input):
            if used != name:
                continue
            try:
                schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
            except onnx.defs.SchemaError:
                return False
            formal = schema.inputs[min(index, len(schema.inputs) - 1)]
            allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
            types = allowed.get(formal.type_str, [formal.type_str])
            if any(t in _FLOAT_TYPES for t in types):
                return False
            found = True
    return found


def _fold(model, values: dict[str, np.ndarray], names: set[str]):
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    kept = [v for v in folded.graph.input if v.name not in names]
    del folded.graph.input[:]
    folded.graph.input.extend(kept)
    for name in sorted(names):
        folded.graph.initializer.append(numpy_helper.from_array(values[name], name))
    return folded


def _import(model, values: dict[str, np.ndarray]):
    """Import ``model``, folding attribute-like inputs; returns ``(graph, folded names)``."""
    names = {n for n, v in values.items() if v.dtype.kind in "iub" and _attribute_like(model, n)}
    for _attempt in range(len(values) + 1):
        graph = load_onnx(_fold(model, values, names), strict=False)
        runtime = {n for node in graph.nodes if node.op_type == UNSUPPORTED for n in _runtime(node)}
        if not runtime & set(values) - names:
            return graph, names
        names |= runtime & set(values)
    return graph, names


def _runtime(node) -> list[str]:
    reason = node.attrs["reason"]
    if "is computed at run time" not in reason:
        return []
    return [reason.split("'")[1]] if "'" in reason else []


def _refusals(graph) -> list[tuple[str, str, str]]:
    return [
        (n.attrs["onnx_op"], n.attrs["kind"], n.attrs["reason"])
        for n in graph.nodes
        if n.op_type == UNSUPPORTED and n.attrs["kind"] != "unknown input shape"
    ]


def _check_refusals(graph) -> None:
    refusals = _refusals(graph)
    if not refusals:
        return
    bad = [r for r in refusals if r[1] not in _SKIPPABLE]
    if bad:
        raise AssertionError(f"refused for a reason that is not a missing feature: {bad}")
    op, kind, reason = refusals[0]
    if kind == "unsupported attribute or value":
        label = "non-constant input" if "computed at run time" in reason else "attribute/value"
        raise Skip(f"{label} not supported: {op}: {reason}")
    raise Skip(f"operator not supported: {op}")


def _classify(message: str) -> str:
    """The skip reason of a refusal raised by the import (one not kept as an opaque node)."""
    if "opset" in message:
        raise AssertionError(f"refused for its opset: {message}")
    if "element type" in message or "graph input" in message:
        return f"input element type not supported: {message}"
    if "must be a constant" in message or "computed at run time" in message:
        return f"non-constant input not supported: {message}"
    if "operator domain" in message or "is not supported" in message:
        kind = "operator" if "operator" in message else "attribute/value"
        return f"{kind} not supported: {message}"
    raise AssertionError(f"refused for a reason that is not a missing feature: {message}")


def _tolerances(case) -> tuple[float, float]:
    if case.name in ROUNDED:
        return case.rtol, case.atol
    rtol = RTOL if case.rtol == _ONNX_RTOL else max(case.rtol, RTOL)
    atol = ATOL if case.atol == _ONNX_ATOL else max(case.atol, ATOL)
    return rtol, atol


def run_case(case) -> None:
    """Run one case; raises :class:`Skip` or an assertion/any error when it fails."""
    inputs_info = [v.name for v in case.model.graph.input]
    for inputs, given in case.data_sets:
        if any(not isinstance(v, np.ndarray | np.generic) for v in inputs):
            raise Skip("input element type not supported: a sequence or optional input")
        values = {n: np.asarray(v) for n, v in zip(inputs_info, inputs, strict=False)}
        try:
            graph, folded = _import(case.model, values)
        except UnsupportedError as exc:
            raise Skip(_classify(str(exc))) from exc
        except InvalidInputError as exc:
            if "the float graph computes in float32 only" not in str(exc):
                raise
            raise Skip(f"input element type not supported: {exc}") from exc
        _check_refusals(graph)
        feed = {n: v for n, v in values.items() if n not in folded}
        got = graph.run_float(feed)
        expected = run_ort(case.model, values) if case.name in ORT_DEFINED else given
        assert len(got) == len(expected), (list(got), len(expected))
        rtol, atol = _tolerances(case)
        for (name, actual), wanted in zip(got.items(), expected, strict=True):
            want = np.asarray(wanted)
            assert actual.shape == want.shape, f"{name}: shape {actual.shape} != {want.shape}"
            np.testing.assert_allclose(
                actual.astype(np.float64),
                want.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"output {name!r}",
            )


def outcome(case) -> Outcome:
    """``run_case`` as a value (for counting the cases by outcome)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            run_case(case)
    except Skip as exc:
        return Outcome("skip", str(exc))
    except (AssertionError, InvalidInputError, UnsupportedError, Exception) as exc:
        return Outcome("fail", f"{type(exc).__name__}: {str(exc)[:300]}")
    return Outcome("pass")


def summary() -> Counter:
    """Counts by outcome and skip reason (``python tests/graph/test_onnx_node_cases.py``)."""
    counts: Counter = Counter()
    for case in _cases().values():
        result = outcome(case)
        key = result.reason.split(":")[0] if result.status == "skip" else ""
        counts[(result.status, key)] += 1
    return counts


@pytest.mark.parametrize("name", sorted(_cases()))
def test_node_case(name: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            run_case(_cases()[name])
    except Skip as exc:
        pytest.skip(str(exc))


if __name__ == "__main__":
    for (status, reason), count in sorted(summary().items()):
        print(f"{status:5} {count:5}  {reason}")


# -- opsets -------------------------------------------------------------------------------------


def test_every_defined_opset_is_accepted():
    assert MIN_OPSET == 1
    assert onnx.defs.onnx_opset_version() == MAX_OPSET


def test_supported_ops_reviewed_up_to_the_installed_onnx():
    """Each normalizer's op has a reviewed range that covers its newest definition."""
    for op in NORMALIZERS:
        if op in REVIEWED:
            oldest, newest = REVIEWED[op]
            assert onnx.defs.get_schema(op, MAX_OPSET).since_version <= newest, op
            assert oldest <= newest, op


def _relu_model(opset: int, op: str = "Relu"):
    node = helper.make_node(op, ["x", "x"] if op == "Add" else ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [7, 13, 22, MAX_OPSET])
def test_relu_imports_at_each_opset(opset):
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    got = load_onnx(_relu_model(opset)).run_float(x)["y"]
    np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_old_op_version_refused_naming_versions():
    with pytest.raises(UnsupportedError, match=r"Add at opset 6 is version 6.*versions 7 to 14"):
        load_onnx(_relu_model(6, "Add"))


def test_newer_op_version_refused(monkeypatch):
    """What a future onnx revises is refused until reviewed (simulated: Relu reviewed to 13)."""
    monkeypatch.setitem(REVIEWED, "Relu", (6, 13))
    with pytest.raises(UnsupportedError, match=r"Relu at opset 14 is version 14.*6 to 13"):
        load_onnx(_relu_model(14))
