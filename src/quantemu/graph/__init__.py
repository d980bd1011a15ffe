"""The model front end: graph IR, ONNX import, shape inference, passes, float executor.

>>> import numpy as np
>>> from quantemu.data import demo_model_path
>>> from quantemu.graph import load_onnx, optimize
>>> graph = optimize(load_onnx(demo_model_path()))
>>> [node.op_type for node in graph.nodes][:4], graph.nodes[0].attrs["activation"]
(['Conv', 'Conv', 'Conv', 'Add'], 'relu')
>>> graph.run_float(np.zeros((2, 1, 8, 8), np.float32))["logits"].shape
(2, 10)

The IR (:mod:`quantemu.graph.ir`) is typed and frozen; every node's attributes are normalized
(see :mod:`quantemu.graph.onnx_attrs` and the docstrings of :mod:`quantemu.graph.ops`), shapes
and dtypes of every value are in ``graph.tensors``, initializers are read-only NumPy arrays and a
QDQ model's scales and zero points are in ``graph.quant_overrides`` (:mod:`quantemu.graph.qdq`).
"""

from __future__ import annotations

from typing import Any

from quantemu.graph.executor import iter_float, run_float
from quantemu.graph.ir import Attrs, Graph, Node, QuantOverride, TensorInfo, format_shape
from quantemu.graph.onnx_attrs import MAX_OPSET, MIN_OPSET
from quantemu.graph.ops import OPS
from quantemu.graph.ops.unsupported import UNSUPPORTED, check_imported, unsupported_nodes
from quantemu.graph.passes import DEFAULT_PIPELINE, PASSES, Pass, optimize, run_passes

#: The ONNX operators the importer accepts (Constant, QuantizeLinear and DequantizeLinear are
#: consumed by the importer itself and never reach the IR).
SUPPORTED_OPS: tuple[str, ...] = tuple(
    sorted(
        {*OPS, "Constant", "Upsample", "QuantizeLinear", "DequantizeLinear"}
        - {"BorderPad", "TfliteCustom"}  # IR operators no ONNX op has the name of
        - {UNSUPPORTED}  # what load_onnx(strict=False) keeps of a node it cannot import
    )
)

__all__ = [
    "DEFAULT_PIPELINE",
    "MAX_OPSET",
    "MIN_OPSET",
    "PASSES",
    "SUPPORTED_OPS",
    "UNSUPPORTED",
    "Attrs",
    "Graph",
    "Node",
    "Pass",
    "QuantOverride",
    "TensorInfo",
    "check_imported",
    "format_shape",
    "iter_float",
    "load_model",
    "load_onnx",
    "load_tflite",
    "optimize",
    "run_float",
    "run_passes",
    "unsupported_nodes",
]


def __getattr__(name: str) -> Any:
    # The importer needs the onnx package; it is loaded on first use so that the command line
    # (which imports this package for `quantemu inspect`) starts quickly.
    if name == "load_onnx":
        from quantemu.graph.onnx_import import load_onnx  # noqa: PLC0415

        return load_onnx
    if name == "load_tflite":
        from quantemu.graph.tflite_import import load_tflite  # noqa: PLC0415

        return load_tflite
    if name == "load_model":
        from quantemu.graph.loading import load_model  # noqa: PLC0415

        return load_model
    raise AttributeError(f"module 'quantemu.graph' has no attribute {name!r}")
