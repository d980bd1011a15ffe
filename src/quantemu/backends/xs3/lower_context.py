"""What every XS3 lowering rule needs: the options, the graph's constants and tensor encodings.

:class:`Options` holds the result-changing choices (the lib_nn build and model variant, and
whether the fused-activation clamp is applied). :class:`LoweringContext` gives each rule the
int8 encoding of any tensor, derived once: a QDQ override where the model fixes one, else
TFLite's parameters from the calibrated range (:mod:`.lower_quant`), else, for operators whose
output TFLite quantizes like their input (pooling, reshapes), the input's encoding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from quantemu.backends.xs3.lower_quant import activation_params, int8_encoding, override_activation
from quantemu.backends.xs3.params import Model, OutputOptions
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.program import LinearEncoding
from quantemu.program.options import LoweringOptions


@dataclass(frozen=True)
class Options(LoweringOptions):
    """The lowering options (``quantemu.compile(..., backend="xs3", **options)``).

    ``model``: :class:`~quantemu.backends.xs3.params.Model` (or its string value),
    ``host_reference`` (default, what every conformance vector pins) or ``device``.
    ``symmetric_saturation``: lib_nn built with ``CONFIG_SYMMETRIC_SATURATION_*`` = 1, so int8
    outputs of the lib_nn operators lie in [-127, 127] (default False: [-128, 127]).
    ``activation_clamp``: apply TFLite's fused-activation range (ReLU: ``max(y, zp)``, ReLU6:
    also ``min(y, q(6))``) after a lib_nn convolution or fully-connected operator. Default False,
    as on XMOS's runtime: tflite2xcore drops the fused activation because the XC operators have
    no activation stage; the output range calibrated on the ReLU output makes the clamp implicit.
    Either way the ``activation_clamped`` counter says how many outputs the clamp moves (or would
    move).
    """

    backend: ClassVar[str] = "xs3"

    model: Model = Model.HOST_REFERENCE
    symmetric_saturation: bool = False
    activation_clamp: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Model.parse(self.model, where="xs3 option model"))
        for name in ("symmetric_saturation", "activation_clamp"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise InvalidInputError(f"xs3 option {name} = {value!r}; use True or False")

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> Options:
        """From keyword options; unknown names are errors that list the known ones."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InvalidInputError(
                f"xs3: unknown option(s) {', '.join(map(repr, unknown))}; the xs3 options are "
                f"{', '.join(known)} (model: "
                f"{', '.join(repr(m.value) for m in Model)})"
            )
        return cls(**options)

    @property
    def output_options(self) -> OutputOptions:
        """The lib_nn operators' variant switches."""
        return OutputOptions(self.symmetric_saturation, self.model)

    @property
    def output_low(self) -> int:
        """The lowest int8 output of the lib_nn operators."""
        return -127 if self.symmetric_saturation else -128


@dataclass
class LoweringContext:
    """The graph being lowered, its calibrated ranges, the options, and the encodings so far."""

    graph: Any
    ranges: Any
    options: Options
    encodings: dict[str, LinearEncoding] = field(default_factory=dict)

    def const(self, name: str) -> np.ndarray | None:
        """The float32 initializer ``name``, or None for a run-time tensor."""
        return self.graph.initializers.get(name) if name else None

    def data_inputs(self, node) -> tuple[str, ...]:
        """The node's run-time (non-constant) inputs, in order."""
        return tuple(n for n in node.inputs if n and n not in self.graph.initializers)

    def shape(self, name: str) -> tuple:
        """The inferred shape of tensor ``name`` (the batch may be symbolic)."""
        return tuple(self.graph.tensors[name].shape)

    def encoding(self, name: str) -> LinearEncoding:
        """The int8 encoding of tensor ``name`` (override, else calibrated), derived once."""
        if name not in self.encodings:
            self.encodings[name] = self._derive(name)
        return self.encodings[name]

    def same_as_input(self, output: str, source: LinearEncoding, where: str) -> LinearEncoding:
        """Give ``output`` the encoding of its input (TFLite's same-scale operators).

        A QDQ override on ``output`` with other parameters cannot be honoured by an operator
        that moves codes unchanged: that is an error.
        """
        override = self.graph.quant_overrides.get(output)
        if override is not None:
            wanted = override_activation(override, output)
            if (wanted.scale, wanted.zero_point) != (source.scale, source.zero_point):
                raise UnsupportedError(
                    f"{where}: the model quantizes {output!r} as {wanted.describe()} but its "
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
