"""What every XS3 lowering rule shares: the int8 encoding of any tensor, derived once.

:class:`Xs3Context` derives an encoding from, in order: a QDQ override where the model fixes
one; TFLite's fixed output quantization (Sigmoid, Tanh, Softmax) where a rule asks for it; the
input's encoding for operators whose output TFLite quantizes like their input (pooling,
reshapes); else TFLite's parameters from the calibrated range (:mod:`.quantization`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from quantemu.backends.tflite.quantize import (
    FIXED_OUTPUT,
    activation_params,
    int8_encoding,
    override_activation,
)
from quantemu.backends.xs3.lower.options import Options
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import LinearEncoding
from quantemu.program.lowering import LoweringContext


class Xs3Context(LoweringContext):
    """The XS3 lowering context (see the module docstring); ``options`` is an :class:`Options`."""

    backend: ClassVar[str] = "xs3"
    options: Options

    def encoding(self, name: str) -> LinearEncoding:
        """The int8 encoding of tensor ``name`` (override, else calibrated), derived once."""
        if name not in self.encodings:
            self.encodings[name] = self._derive(name)
        return self.encodings[name]

    def input_encoding(self, name: str) -> LinearEncoding:
        """How graph input ``name`` is quantized on entry.

        A QDQ model quantizes an input with the Q/DQ pair right after it (imported as a
        saturation Clip whose output carries the pair's override): when every reader of the
        input is such a Clip with the same parameters, the input takes them, so the data enters
        on the model's grid. Otherwise TFLite's parameters from the calibrated range.
        """
        readers = self.graph.consumers(name)
        overrides = [self.graph.quant_overrides.get(n.outputs[0]) for n in readers]
        clips = readers and all(n.op_type == "Clip" for n in readers) and None not in overrides
        if clips and all(o.same_parameters(overrides[0]) for o in overrides):
            self.encodings[name] = override_activation(overrides[0], name)
        return self.encoding(name)

    def output_encoding(self, node: Node) -> LinearEncoding:
        """The output encoding: TFLite's fixed one for Sigmoid/Tanh/Softmax unless overridden."""
        out = node.outputs[0]
        if node.op_type in FIXED_OUTPUT and out not in self.graph.quant_overrides:
            scale, zero_point = FIXED_OUTPUT[node.op_type]
            self.encodings[out] = int8_encoding(scale, zero_point)
        return self.encoding(out)

    def same_as_input(self, node: Node) -> LinearEncoding:
        """Give the node's output the encoding of its first input (TFLite's same-scale
        operators) and return it.

        A QDQ override on the output with other parameters cannot be honoured by an operator
        that moves codes unchanged: that is an error.
        """
        source = self.encoding(node.inputs[0])
        output = node.outputs[0]
        override = self.graph.quant_overrides.get(output)
        if override is not None:
            wanted = override_activation(override, output)
            if (wanted.scale, wanted.zero_point) != (source.scale, source.zero_point):
                raise UnsupportedError(
                    f"{node}: the model quantizes {output!r} as {wanted.describe()} but its "
                    f"input as {source.describe()}; this operator passes int8 codes through "
                    "unchanged (TFLite requires equal input and output quantization)"
                )
        self.encodings[output] = source
        return source

    def _derive(self, name: str) -> LinearEncoding:
        override = self.graph.quant_overrides.get(name)
        if override is not None:
            return override_activation(override, name)
        try:
            rng = self.ranges[name]
        except KeyError:
            raise InvalidInputError(
                f"tensor {name!r} has no calibrated range; calibrate every tensor of the "
                "optimized graph (quantemu.calibrate(graph, data)) before lowering"
            ) from None
        # Activations are quantized per tensor: a per-channel range collapses to its extremes.
        low, high = float(np.min(rng.min)), float(np.max(rng.max))
        return int8_encoding(*activation_params(low, high))
