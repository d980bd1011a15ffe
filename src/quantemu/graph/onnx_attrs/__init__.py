"""Per-op normalization of ONNX nodes into IR nodes (attributes and attribute-like inputs).

Every supported op has a normalizer that (1) rejects attributes it does not know, naming the node,
the op and the attributes it does know; (2) fills every default for the model's opset; (3) folds
constant attribute-like inputs (Clip min/max, Reshape shape, Resize scales/sizes, ReduceMean axes,
Dropout ratio/training_mode) into attributes, rejecting non-constant ones; and (4) resolves
layout conveniences (auto_pad into explicit pads, negative axes, Transpose's default perm).
The normalized attributes of each op are listed in the docstrings of :mod:`quantemu.graph.ops`.

The normalizers live by operator family, one module for each module of
:mod:`quantemu.graph.ops` (``onnx_attrs.conv`` normalizes what ``ops.conv`` computes); what
they share is in :mod:`.base` (the raw node, the context, the registry, the checks) and
:mod:`.opsets` (the opsets accepted and the op versions reviewed). Importing this package
registers every normalizer in :data:`NORMALIZERS`.
"""

from quantemu.graph.onnx_attrs import (  # noqa: F401  (each registers its normalizers)
    activation,
    conv,
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
from quantemu.graph.onnx_attrs.base import (
    BIND_HINT,
    NORMALIZERS,
    Context,
    Normalizer,
    RawNode,
    normalizer,
)
from quantemu.graph.onnx_attrs.conv import spatial_attrs
from quantemu.graph.onnx_attrs.opsets import (
    LEGACY_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    REVIEWED,
    check_reviewed,
)

#: The node's checks as functions of it (``check_attrs(raw, allowed)`` is
#: ``raw.check_attrs(allowed)``), as this module has always offered them.
check_attrs, require = RawNode.check_attrs, RawNode.require
make, single_output = RawNode.make, RawNode.single_output

__all__ = [
    "BIND_HINT",
    "LEGACY_OPSET",
    "MAX_OPSET",
    "MIN_OPSET",
    "NORMALIZERS",
    "REVIEWED",
    "Context",
    "Normalizer",
    "RawNode",
    "check_attrs",
    "check_reviewed",
    "make",
    "normalizer",
    "require",
    "single_output",
    "spatial_attrs",
]
