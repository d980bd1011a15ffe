"""What every ``tflite`` lowering rule shares: encodings, weights and biases, derived once.

A tensor's encoding comes from, in order: the model's own quantization (an int8 TFLite model's
tensors, or a QDQ model's overrides); TFLite's fixed output quantization (LOGISTIC, SOFTMAX
1/256 and -128; TANH 1/128 and 0); the input's encoding for operators TFLite's converter keeps
on their input's scale (pooling, reshapes, padding); else the converter's parameters from the
calibrated range (:mod:`quantemu.backends.tflite.quantize`). Weights and biases: the model's
integers, else the converter's per-channel symmetric int8 weights and int32 biases.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from quantemu.backends.tflite.lower.options import TfliteFamilyOptions
from quantemu.backends.tflite.quantize import (
    FIXED_OUTPUT,
    activation_params,
    activation_range,
    bias_scales,
    int8_encoding,
    override_activation,
    override_weights,
    quantize_bias,
    quantize_weights,
    quantize_weights_and_bias,
)
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import LinearEncoding
from quantemu.program.lowering import LoweringContext

#: Operators that move codes without changing their quantization.
MOVES = ("Reshape", "Transpose", "Flatten", "Identity", "Dropout")
#: LiteRT's float kernels that may write their output into an input's buffer.
INPLACE = ("Add", "Sub", "Mul")
#: Operators whose inputs the converter gives their output's quantization.
SAME_SCALE = ("Concat", "Min", "Max")


class TfliteContext(LoweringContext):
    """The ``tflite`` lowering context (module docstring); ``options``: ``tflite``'s
    :class:`~quantemu.backends.tflite.lower.options.Options`, or the options of another target
    of the TFLite family, which supply :class:`TfliteFamilyOptions`."""

    backend: ClassVar[str] = "tflite"
    options: TfliteFamilyOptions  # tflite's Options, or a TFLite-family target's own

    def __post_init__(self) -> None:
        if not isinstance(self.options, TfliteFamilyOptions):
            raise TypeError(
                f"{type(self).__name__}: {type(self.options).__name__} lacks what the tflite "
                "rules read (kernel_runtime, inplace_calibration, fc_first_channel_scale, "
                "missing_builtins: TfliteFamilyOptions)"
            )

    def encoding(self, name: str) -> LinearEncoding:
        """The int8 encoding of tensor ``name`` (the model's, else calibrated), derived once."""
        if name not in self.encodings:
            self.encodings[name] = self._derive(name)
        return self.encodings[name]

    def output_encoding(self, node: Node) -> LinearEncoding:
        """The output encoding; TFLite's fixed one for Sigmoid/Tanh/Softmax unless given."""
        out = node.outputs[0]
        if node.op_type in FIXED_OUTPUT and out not in self.graph.quant_overrides:
            self.encodings[out] = int8_encoding(*FIXED_OUTPUT[node.op_type])
        return self.encoding(out)

    def input_encoding(self, name: str) -> LinearEncoding:
        """How graph input ``name`` is quantized on entry.

        A QDQ model quantizes an input with the Q/DQ pair right after it (imported as a
        saturation Clip whose output carries the pair's override): when every reader of the
        input is such a Clip with the same parameters, the input takes them, so the data enters
        on the model's grid. Otherwise TFLite's parameters from the calibrated range.
        """
        if name in self.graph.quant_overrides:  # the model quantizes the input itself
            return self.encoding(name)
        readers = self.graph.consumers(name)
        overrides = [self.graph.quant_overrides.get(n.outputs[0]) for n in readers]
        clips = readers and all(n.op_type == "Clip" for n in readers) and None not in overrides
        if clips and all(o.same_parameters(overrides[0]) for o in overrides):
            self.encodings[name] = override_activation(overrides[0], name)
        return self.encoding(name)

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

    def activation(self, node: Node, encoding: LinearEncoding) -> tuple[int, int]:
        """The int8 clamp range of the node's fused activation (int8's range without one)."""
        act = activation_range(node.attrs, encoding, str(node))
        return (act.low if act.floor else -128, act.high if act.ceiling else 127)

    def with_fused_activation(self, params, node: Node, encoding: LinearEncoding):
        """``params`` (a kernel's parameters with ``act_min``, ``act_max``, ``floor`` and
        ``ceiling``) clamped to the node's fused activation, as :meth:`activation` gives it;
        ``floor`` / ``ceiling`` say which bound the activation set."""
        act = activation_range(node.attrs, encoding, str(node))
        return dataclasses.replace(
            params,
            act_min=act.low if act.floor else -128,
            act_max=act.high if act.ceiling else 127,
            floor=act.floor,
            ceiling=act.ceiling,
        )

    def weights(self, node: Node, index: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
        """``(int8 codes, float32 per-channel scales)`` of weight input ``index``."""
        name = node.inputs[index]
        w = self.constant(node, index, "weight")
        channels = w.shape[axis]
        override = self.graph.quant_overrides.get(name)
        if override is not None:
            return override_weights(override, name, axis, channels)
        codes, scales, _ = self._converter_weights(node, index, axis)
        return codes, scales

    def _converter_weights(self, node: Node, index: int, axis: int):
        """``(codes, scales, bias codes or None)`` as TFLite's converter derives them: the float
        bias of a Conv / Gemm (input 2) can move a channel's weight scale."""
        w = self.constant(node, index, "weight")
        bias = node.inputs[2] if index == 1 and len(node.inputs) > 2 else ""
        if not bias or bias in self.graph.quant_overrides:
            return (*quantize_weights(w, axis), None)
        s_in = self.encoding(node.inputs[0]).scale
        return quantize_weights_and_bias(w, self.constant(node, 2, "bias"), s_in, axis)

    def bias(self, node: Node, index: int, s_in: float, s_w: np.ndarray) -> np.ndarray | None:
        """The int32 bias codes (int64 array) of input ``index``, or None when absent."""
        name = node.inputs[index] if index < len(node.inputs) else ""
        if not name:
            return None
        override = self.graph.quant_overrides.get(name)
        if override is not None and override.values is not None:
            if override.dtype != "int32" or np.any(np.asarray(override.zero_point) != 0):
                raise UnsupportedError(
                    f"{node}: bias {name!r} is {override.dtype} with a zero point; TFLite int8 "
                    "kernels take int32 biases with zero point 0"
                )
            return np.asarray(override.values, np.int64).reshape(-1)
        if index == 2 and node.inputs[1] not in self.graph.quant_overrides:
            trans_b = node.op_type == "Conv" or bool(node.attrs.get("transB", 0))
            return self._converter_weights(node, 1, 0 if trans_b else 1)[2]
        return quantize_bias(self.constant(node, index, "bias"), bias_scales(s_in, s_w))

    def operand(self, name: str) -> tuple[np.ndarray | None, LinearEncoding]:
        """An elementwise operand: ``(int64 codes of a constant, or None, its encoding)``.

        A constant's codes are the model's own integers where it gives them, else the constant
        quantized as TFLite's converter quantizes a constant tensor (its own min/max range).
        """
        value = self.const(name)
        if value is None:
            return None, self.encoding(name)
        override = self.graph.quant_overrides.get(name)
        if override is not None and override.values is not None:
            return np.asarray(override.values, np.int64), self.encoding(name)
        if override is not None:
            enc = self.encoding(name)
        else:
            enc = int8_encoding(*activation_params(float(value.min()), float(value.max())))
        return enc.quantize(value).astype(np.int64), enc

    def _concatenated_as(self, name: str) -> str | None:
        """The output of the Concat (or Min, Max) ``name`` feeds (through code moves), if its
        scale rules.

        TensorFlow's converter gives CONCATENATION's, MINIMUM's and MAXIMUM's inputs the
        output's quantization (they are same-scale operators): a producer with a free scale
        takes it, while one with a fixed output quantization (LOGISTIC, TANH, SOFTMAX) keeps its
        own and is requantized.
        """
        producer = self.graph.producer(name)
        if producer is not None and producer.op_type in FIXED_OUTPUT:
            return None
        pending, seen = [name], set()
        while pending:
            tensor = pending.pop()
            for reader in self.graph.consumers(tensor):
                if reader.op_type in SAME_SCALE:
                    return reader.outputs[0]
                if reader.op_type in MOVES and reader.outputs[0] not in seen:
                    seen.add(reader.outputs[0])
                    pending.append(reader.outputs[0])
        return None

    def _derive(self, name: str) -> LinearEncoding:
        override = self.graph.quant_overrides.get(name)
        if override is not None:
            return override_activation(override, name)
        concat = self._concatenated_as(name)
        if concat is not None:
            return self.encoding(concat)
        try:
            rng = self.ranges[name]
        except KeyError:
            raise InvalidInputError(
                f"tensor {name!r} has no calibrated range; calibrate every tensor of the "
                "optimized graph (quantemu.calibrate(graph, data)) before lowering"
            ) from None
        low, high = float(np.min(rng.min)), float(np.max(rng.max))
        shared = self._overwritten_by(name)
        if shared is not None and shared in self.ranges:
            low = min(low, float(np.min(self.ranges[shared].min)))
            high = max(high, float(np.max(self.ranges[shared].max)))
        return int8_encoding(*activation_params(low, high))

    def _overwritten_by(self, name: str) -> str | None:
        """The output of the in-place ADD/SUB/MUL that reuses ``name``'s buffer, if any.

        TensorFlow's calibrator logs an operator's inputs after the operator has run, on
        LiteRT's float interpreter, whose ADD, SUB and MUL write their output into an input's
        buffer when they can: the first input (in order) that is computed at run time, read by
        that operator alone, not a graph input, and shaped as the output, which must not be a
        graph output. That input's logged range is then its own and the output's together (so
        the converter quantizes a LayerNormalization's variance on its ``+ epsilon`` range).
        Checked against TensorFlow 2.17 on tests/data/tflite_refs (layer_norm, encoder_relu).
        """
        readers = self.graph.consumers(name)
        if not self.options.inplace_calibration:
            return None
        if len(readers) != 1 or readers[0].op_type not in INPLACE:
            return None
        node, graph = readers[0], self.graph
        out = node.outputs[0]
        if self._is_graph_output(out):
            return None
        for candidate in node.inputs[:2]:
            if (
                self.const(candidate) is None
                and not self._is_graph_input(candidate)
                and len(graph.consumers(candidate)) == 1
                and tuple(self.shape(candidate)) == tuple(self.shape(out))
            ):
                return out if candidate == name else None
        return None

    def _is_graph_input(self, name: str) -> bool:
        """``name`` is a graph input, or a layout view of one (TFLite has no such moves)."""
        producer = self.graph.producer(name)
        while producer is not None and producer.op_type in MOVES:
            name = producer.inputs[0]
            producer = self.graph.producer(name)
        return name in self.graph.input_names

    def _is_graph_output(self, name: str) -> bool:
        """``name`` is a graph output, or only moved into one."""
        while name not in self.graph.outputs:
            readers = self.graph.consumers(name)
            if len(readers) != 1 or readers[0].op_type not in MOVES:
                return False
            name = readers[0].outputs[0]
        return True
