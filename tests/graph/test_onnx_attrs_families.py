"""The normalizers live by operator family: ``onnx_attrs.X`` normalizes what ``ops.X`` computes."""

from __future__ import annotations

import pkgutil

from quantemu.graph import onnx_attrs, ops
from quantemu.graph.onnx_attrs import NORMALIZERS, base
from quantemu.graph.ops import OPS

#: onnx_attrs modules that are not an op family, and ops modules no ONNX node reaches.
_SHARED = {"base", "opsets"}
_NOT_ONNX = {"_spec", "custom", "unsupported"}


def _modules(package) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__)}


def test_every_kernel_module_has_its_normalizer_module():
    assert _modules(onnx_attrs) - _SHARED == _modules(ops) - _NOT_ONNX


def test_every_op_is_normalized_in_the_module_named_like_its_kernels():
    for op_type, fn in NORMALIZERS.items():
        if op_type not in OPS or fn is base.without_attributes:
            continue  # rewritten before normalization (Upsample, Split...), or attribute-free
        kernel_module = OPS[op_type].run.__module__.rsplit(".", 1)[1]
        assert fn.__module__ == f"quantemu.graph.onnx_attrs.{kernel_module}", op_type


def test_attribute_free_ops_are_registered_by_their_family():
    # without_attributes is shared; each family registers it for its own ops only.
    plain = {op for op, fn in NORMALIZERS.items() if fn is base.without_attributes}
    assert plain == {*onnx_attrs.activation.PLAIN, "MatMul", "GlobalAveragePool", "GlobalMaxPool"}
