"""TFLite's converter rules (quantize.py) give back every int8 reference file's integers.

For each weighted operator (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED) of every int8 model in
``tests/data/tflite_refs`` and ``tests/data/models_xs3_public``, the weights and bias as
quantemu's TFLite reader dequantizes them (``codes * scale``, float32) are quantized again with
:func:`quantize_weights_and_bias` at the file's input scale: the int8 weights, their float32
scales and the int32 biases must come back exactly. No TensorFlow needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantemu.backends.tflite.quantize import quantize_weights_and_bias
from quantemu.graph import load_tflite

DATA = Path(__file__).resolve().parents[2] / "data"
MODELS = sorted(
    p for d in ("tflite_refs", "models_xs3_public") for p in (DATA / d).glob("*.int8.tflite")
)


def _input_scale(graph, name: str) -> float:
    """The scale of a node input, looking through the layout Transposes / Reshapes the reader
    inserts (they carry no quantization of their own)."""
    producers = {out: n for n in graph.nodes for out in n.outputs}
    while name not in graph.quant_overrides:
        name = producers[name].inputs[0]
    return float(np.asarray(graph.quant_overrides[name].scale).reshape(-1)[0])


def _weighted(graph):
    for node in graph.nodes:
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        w = node.inputs[1]
        if w in graph.initializers and w in graph.quant_overrides:
            yield node


def _models_with_weights() -> list[Path]:
    return [p for p in MODELS if any(True for _ in _weighted(load_tflite(str(p))))]


@pytest.mark.parametrize("path", _models_with_weights(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_converter_rules_give_back_the_file(path: Path) -> None:
    graph = load_tflite(str(path))
    nodes = list(_weighted(graph))
    assert nodes
    for node in nodes:
        w_name = node.inputs[1]
        ov = graph.quant_overrides[w_name]
        w = graph.initializers[w_name]
        axis = int(ov.axis) if ov.per_axis else None
        b_name = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        bias = graph.initializers[b_name] if b_name else None
        s_in = _input_scale(graph, node.inputs[0])
        if axis is None:  # per-tensor weights: one channel holding everything
            q, s, b = quantize_weights_and_bias(w.reshape(1, -1), None, s_in)
            q = q.reshape(w.shape)
        else:
            q, s, b = quantize_weights_and_bias(w, bias, s_in, axis)
        where = f"{path.name}: {node}"
        assert np.array_equal(q, np.asarray(ov.values, np.int8)), where
        want_s = np.asarray(ov.scale, np.float32).reshape(-1)
        assert np.array_equal(np.broadcast_to(s, want_s.shape), want_s), where
        if b_name and axis is not None:
            want_b = np.asarray(graph.quant_overrides[b_name].values, np.int64).reshape(-1)
            assert np.array_equal(b, want_b), where
