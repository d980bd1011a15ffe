"""Which ONNX opsets the importer accepts, and which version of each op it was checked against."""

from __future__ import annotations

import onnx.defs

from quantemu.errors import UnsupportedError
from quantemu.graph.onnx_attrs.base import RawNode

#: The default-domain opsets the importer accepts: every one the installed ``onnx`` package
#: defines. What each op means at the model's opset is bounded per op by :data:`REVIEWED`.
MIN_OPSET, MAX_OPSET = 1, int(onnx.defs.onnx_opset_version())

#: For each op, the oldest and the newest ONNX versions (``since_version``) whose attributes,
#: inputs and semantics its normalizer and kernel were checked against (onnx 1.23, opset 28).
#: Opsets 22 to 25 only widened these ops' types (bfloat16, float8, int4...), which quantemu
#: computes in float32. Older versions (Add-6's ``broadcast``, Relu-1's ``consumed_inputs``...)
#: and versions a newer ``onnx`` adds are refused by :func:`check_reviewed`, naming both.
#: Modules registering other normalizers add their own entries; ops without one are taken
#: from opset :data:`LEGACY_OPSET` on.
REVIEWED: dict[str, tuple[int, int]] = {
    "Add": (7, 14), "AveragePool": (7, 22), "BatchNormalization": (7, 15), "Clip": (6, 13),
    "Concat": (4, 13), "Conv": (1, 22), "ConvTranspose": (1, 22), "Div": (7, 14),
    "Dropout": (7, 22), "Erf": (9, 13), "Flatten": (1, 25), "Gelu": (20, 20), "Gemm": (7, 13),
    "GlobalAveragePool": (1, 22), "GlobalMaxPool": (1, 22), "HardSigmoid": (6, 22),
    "HardSwish": (14, 22), "Identity": (1, 25), "LRN": (1, 13), "LayerNormalization": (17, 17),
    "LeakyRelu": (6, 16), "MatMul": (1, 13), "MaxPool": (8, 22), "Mul": (7, 14),
    "PRelu": (7, 16), "Pad": (2, 25), "Pow": (7, 15), "Reciprocal": (6, 13),
    "ReduceMean": (1, 18), "Relu": (6, 14), "Reshape": (5, 25), "Resize": (10, 19),
    "Sigmoid": (6, 13), "Softmax": (1, 13), "Sqrt": (6, 13), "Squeeze": (1, 25), "Sub": (7, 14),
    "Tanh": (6, 13), "Transpose": (1, 25), "Unsqueeze": (1, 25), "Upsample": (7, 10),
}  # fmt: skip
LEGACY_OPSET = 9


def check_reviewed(raw: RawNode, opset: int) -> None:
    """Refuse an op whose definition at ``opset`` is one quantemu has not reviewed."""
    oldest, newest = REVIEWED.get(raw.op_type, (0, 10**6))
    if raw.op_type not in REVIEWED and opset < LEGACY_OPSET:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} is supported from opset {LEGACY_OPSET}, the model imports "
            f"opset {opset}; convert it with onnx.version_converter.convert_version"
        )
    try:
        version = onnx.defs.get_schema(raw.op_type, opset).since_version
    except onnx.defs.SchemaError:  # not defined at this opset: the normalizer's own check
        return
    if not oldest <= version <= newest:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} at opset {opset} is version {version}, which quantemu does "
            f"not handle (it handles {raw.op_type} versions {oldest} to {newest}); convert the "
            "model with onnx.version_converter.convert_version"
        )
