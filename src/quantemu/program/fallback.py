"""The float-fallback layer: a node the target's toolchain runs outside its integer pipeline.

Dequantize the inputs, run quantemu.graph's float32 kernel of the node, requantize the result
to the output's encoding. Never exact (``exact=False``); the note says why the node fell back.
How the result is requantized is the backend's: :meth:`FloatFallbackLayer.requantize` uses the
encoding's ``target_quantize`` with no counters, and a backend overrides it to count what
saturates or to use its runtime's own quantizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.program.encoding import Encoding, QTensor
from quantemu.program.layer import Layer, LayerOutput


@dataclass(frozen=True, kw_only=True)
class FloatFallbackLayer(Layer):
    """``node`` in float32 on the host (see the module docstring).

    ``constants``: the node's initializer inputs by input position; the layer's run-time
    inputs fill the other present positions in order, absent optional inputs stay None.
    """

    node: Node
    encoding: Encoding
    constants: Mapping[int, np.ndarray] = field(default_factory=dict)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Dequantize, the float kernel, :meth:`requantize`."""
        fed = iter(t.dequantize() for t in inputs)
        args = [
            self.constants[i] if i in self.constants else (next(fed) if name else None)
            for i, name in enumerate(self.node.inputs)
        ]
        out = run_node(self.node, args)[0]
        codes, counters = self.requantize(out)
        return LayerOutput(QTensor(codes, self.encoding), counters)

    def requantize(self, values: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        """The output codes of float ``values`` and the counters of that step."""
        return self.encoding.target_quantize(values), {}


def node_constants(
    graph_initializers: Mapping[str, np.ndarray], node: Node
) -> dict[int, np.ndarray]:
    """The initializer inputs of ``node`` by input position (for :class:`FloatFallbackLayer`)."""
    return {
        i: np.asarray(graph_initializers[n])
        for i, n in enumerate(node.inputs)
        if n and n in graph_initializers
    }
