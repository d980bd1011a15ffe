"""Ranges a pre-quantized model fixes itself: an int8 TFLite file needs no calibration data.

A model is *fully quantized* when the graph inputs and every value a node computes carry a
:class:`~quantemu.graph.ir.QuantOverride` (every tensor of an int8 TFLite model does; a QDQ
ONNX model usually does not). Its ranges are the representable ranges of those quantizations,
``[(qmin - z) * s, (qmax - z) * s]``, so a backend that derives its own parameters from ranges
gets the model's, and one that honours overrides uses them directly.
"""

from __future__ import annotations

import numpy as np

from quantemu.calibration.ranges import CalibrationRanges, TensorRange
from quantemu.errors import InvalidInputError
from quantemu.graph import Graph, QuantOverride

#: The ``observer`` recorded for ranges taken from the model itself.
FROM_MODEL = "model"


def unquantized_tensors(graph: Graph) -> list[str]:
    """The graph inputs and node outputs without a quantization override (float values).

    A float input that only a quantizing node reads (TFLite's QUANTIZE, imported as a Clip
    whose output is quantized) takes that quantization, and a float output that only
    dequantizes a quantized value (DEQUANTIZE, an Identity) is that value's quantization: neither
    needs calibration.
    """
    names = [*graph.input_names, *(o for node in graph.nodes for o in node.outputs if o)]
    return [
        name
        for name in names
        if name not in graph.quant_overrides and _implied(graph, name) is None
    ]


def _implied(graph: Graph, name: str) -> QuantOverride | None:
    """The quantization a float input's quantizing readers, or a dequantized output's source,
    give ``name`` (``None`` when there is none)."""
    producer = graph.producer(name)
    if producer is not None:
        if producer.op_type == "Identity":
            return graph.quant_overrides.get(producer.inputs[0])
        return None
    readers = graph.consumers(name)
    found = [graph.quant_overrides.get(n.outputs[0]) for n in readers if n.op_type == "Clip"]
    if readers and len(found) == len(readers) and None not in found:
        return found[0] if all(f.same_parameters(found[0]) for f in found) else None
    return None


def is_fully_quantized(graph: Graph) -> bool:
    """True when every input and every computed value has its quantization in the model."""
    return not unquantized_tensors(graph)


def ranges_from_model(graph: Graph) -> CalibrationRanges:
    """The representable range of every quantized activation (see the module docstring)."""
    missing = unquantized_tensors(graph)
    if missing:
        raise InvalidInputError(
            f"the model leaves {len(missing)} tensors unquantized (e.g. {missing[0]!r}); it needs "
            "calibration data (--calib DATA, or calib=... in quantemu.compile)"
        )
    ranges = {}
    for name in [*graph.input_names, *(o for node in graph.nodes for o in node.outputs if o)]:
        ov = graph.quant_overrides.get(name) or _implied(graph, name)
        info = np.iinfo(ov.dtype)
        scale, zero = float(ov.scale.reshape(-1)[0]), int(ov.zero_point.reshape(-1)[0])
        ranges[name] = TensorRange((info.min - zero) * scale, (info.max - zero) * scale)
    return CalibrationRanges(
        tensors=ranges, observer=FROM_MODEL, model=graph.metadata.get("source", graph.name)
    )
