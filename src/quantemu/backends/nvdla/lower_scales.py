"""Lowering context for NVDLA: options, the scale of every tensor, and split helpers.

NVIDIA's compiler quantizes activations per tensor and symmetrically: from a calibration table
entry ``max|x|`` it takes ``scale = max|x| / 127`` (float32) with offset 0 (the table's
``offset`` "should be 0 for symmetric scaling", nvdla/sw ``LowPrecision.md``). quantemu applies
that rule to the calibrated ``(min, max)`` of every tensor: ``max|x| = max(|min|, |max|)``.

A QDQ model's overrides replace calibration where NVDLA can hold them: a per-tensor int8 zero
point of 0. Anything else (uint8, a non-zero zero point, per-axis activations) is an error,
because NVDLA stores activations as symmetric per-tensor int8 only.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from quantemu.backends.nvdla.quantize import ScaleSplit, split_scale
from quantemu.calibration.ranges import CalibrationRanges
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node, QuantOverride
from quantemu.program import LinearEncoding
from quantemu.program.options import LoweringOptions

#: Ops whose output keeps the input's codes (standalone activations): a QDQ override on their
#: output is adopted by their producer when it is their only reader.
PASS_THROUGH_ACTIVATIONS = ("Relu", "Clip", "LeakyRelu")


class WeightScaling(enum.Enum):
    """How the compiler scales weights (nvdla/sw ``QuantizationMode``).

    ``PER_KERNEL``: one scale for the whole weight blob of a layer (``max|w| / 127``), rescale
    per tensor in the SDP output converter. ``PER_FILTER``: one scale per output channel,
    rescale per channel through the BS MUL operand.
    """

    PER_KERNEL = "per_kernel"
    PER_FILTER = "per_filter"


class Rescale(enum.Enum):
    """Where a convolution's requantization happens.

    ``AUTO``: the output converter (``CVT_SCALE``/``CVT_SHIFT``) when every channel has the same
    factor, the BS MUL per-channel operand otherwise (the compiler's choice).
    ``OUTPUT_CONVERTER``: always the converter (an error for per-filter weights).
    ``BS_MUL``: always the BS MUL per-channel operand, converter identity.
    """

    AUTO = "auto"
    OUTPUT_CONVERTER = "output_converter"
    BS_MUL = "bs_mul"


@dataclass(frozen=True)
class Options(LoweringOptions):
    """The NVDLA lowering options (each changes results; all go in the report header).

    ``weights``: :class:`WeightScaling` (default ``per_kernel``, the compiler's PER_KERNEL).
    ``rescale``: :class:`Rescale` (default ``auto``).
    ``scale_split``: :class:`~quantemu.backends.nvdla.quantize.ScaleSplit` for the factors the
    compiler splits (requantization): ``nvdla_compiler`` (float32 ``log``, default) or ``exact``.
    """

    backend: ClassVar[str] = "nvdla"

    weights: WeightScaling = WeightScaling.PER_KERNEL
    rescale: Rescale = Rescale.AUTO
    scale_split: ScaleSplit = ScaleSplit.NVDLA_COMPILER

    def __post_init__(self) -> None:
        if self.weights is WeightScaling.PER_FILTER and self.rescale is Rescale.OUTPUT_CONVERTER:
            raise InvalidInputError(
                "nvdla lowering: rescale=output_converter cannot express per-filter weight "
                "scales (one CVT_SCALE per layer); use rescale=auto or bs_mul, or "
                "weights=per_kernel"
            )

    def describe(self) -> dict[str, str]:
        """Header entries."""
        return {f.name: getattr(self, f.name).value for f in fields(self)}


def f32(v: float) -> float:
    """``v`` rounded to float32 (the compiler's ``NvF32``)."""
    return float(np.float32(v))


def exact_split(factor: float) -> tuple[int, int]:
    """``(scale, shift)`` of a factor quantemu chooses itself (not the compiler): exact log2.

    The compiler's float32 ``log`` rejects some exact powers of two; factors quantemu picks
    (EW lift, LUT output, leaky slope) are often such powers, so they use the exact split.
    """
    return split_scale(factor, how=ScaleSplit.EXACT)


def round_away(v: float) -> int:
    """Round half away from zero (the NVDLA converters' rule)."""
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


@dataclass
class Context:
    """What lowering knows while it walks the graph: the encodings assigned so far."""

    graph: Graph
    ranges: CalibrationRanges | Mapping
    options: Options
    encodings: dict[str, LinearEncoding] = field(default_factory=dict)

    def initializer(self, name: str) -> np.ndarray | None:
        """The constant ``name`` (``None`` for a computed tensor)."""
        return self.graph.initializers.get(name)

    def encoding(self, tensor: str) -> LinearEncoding:
        """The encoding already assigned to ``tensor`` (a graph input or an earlier output)."""
        if tensor not in self.encodings:
            raise InvalidInputError(f"nvdla lowering: tensor {tensor!r} has no encoding yet")
        return self.encodings[tensor]

    def new_encoding(self, tensor: str) -> LinearEncoding:
        """The int8 encoding of a tensor a layer produces: override, adopted override, or
        calibration (``max|x| / 127``)."""
        ov = self.graph.quant_overrides.get(tensor)
        if ov is None:
            ov = self._adopted_override(tensor)
        scale = _override_scale(tensor, ov) if ov is not None else self._calibrated(tensor)
        return LinearEncoding(scale=scale, zero_point=0, dtype="int8")

    def _adopted_override(self, tensor: str) -> QuantOverride | None:
        readers = self.graph.consumers(tensor)
        sole = len(readers) == 1 and tensor not in self.graph.outputs
        if sole and readers[0].op_type in PASS_THROUGH_ACTIVATIONS:
            return self.graph.quant_overrides.get(readers[0].outputs[0])
        return None

    def _calibrated(self, tensor: str) -> float:
        try:
            r = self.ranges[tensor]
        except KeyError:
            raise InvalidInputError(
                f"nvdla lowering: no calibrated range for tensor {tensor!r}; calibrate the "
                "optimized graph (quantemu.calibrate(optimize(graph), data)) so every tensor "
                "has a range"
            ) from None
        amax = float(max(np.max(np.abs(r.min)), np.max(np.abs(r.max))))
        if not math.isfinite(amax):
            raise InvalidInputError(
                f"nvdla lowering: tensor {tensor!r} has a non-finite calibrated range "
                f"({r.min}, {r.max}); check the calibration data"
            )
        if amax == 0.0:
            return 1.0  # a constant-zero tensor: every code is 0 whatever the scale
        return f32(np.float32(amax) / np.float32(127))


def _override_scale(tensor: str, ov: QuantOverride) -> float:
    zp = np.asarray(ov.zero_point)
    if ov.axis is not None:
        raise UnsupportedError(
            f"nvdla lowering: tensor {tensor!r} has a per-axis activation quantization "
            f"(axis {ov.axis}) from {ov.source or 'the model'}; NVDLA activations are per tensor"
        )
    if zp.dtype != np.int8 or np.any(zp != 0):
        raise UnsupportedError(
            f"nvdla lowering: tensor {tensor!r} is quantized as {zp.dtype} with zero point "
            f"{zp.tolist()} by {ov.source or 'the model'}; NVDLA activations are symmetric int8 "
            "(zero point 0). Quantize the model with symmetric int8 activations"
        )
    return float(np.asarray(ov.scale, dtype=np.float64).reshape(()))


def node_error(node: Node, exc: Exception) -> InvalidInputError:
    """``exc`` re-raised with the node it happened in."""
    return InvalidInputError(f"nvdla lowering of {node}: {exc}")
