"""The NVDLA lowering context: the scale of every tensor, and the factor splits rules share.

NVIDIA's compiler quantizes activations per tensor and symmetrically: from a calibration table
entry ``max|x|`` it takes ``scale = max|x| / 127`` (float32) with offset 0 (the table's
``offset`` "should be 0 for symmetric scaling", nvdla/sw ``LowPrecision.md``). quantemu applies
that rule to the calibrated ``(min, max)`` of every tensor: ``max|x| = max(|min|, |max|)``.

A QDQ model's overrides replace calibration where NVDLA can hold them: a per-tensor int8 zero
point of 0. Anything else (uint8, a non-zero zero point, per-axis activations) is an error,
because NVDLA stores activations as symmetric per-tensor int8 only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from quantemu.backends.nvdla.lower.options import Options
from quantemu.backends.nvdla.quantize import ScaleSplit, split_scale
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node, QuantOverride
from quantemu.program import Layer, LinearEncoding
from quantemu.program.lowering import LoweringContext

#: Ops whose output keeps the input's codes (standalone activations): a QDQ override on their
#: output is adopted by their producer when it is their only reader.
PASS_THROUGH_ACTIVATIONS = ("Relu", "Clip", "LeakyRelu")


def f32(v: float) -> float:
    """``v`` rounded to float32 (the compiler's ``NvF32``)."""
    return float(np.float32(v))


def exact_split(factor: float) -> tuple[int, int]:
    """``(scale, shift)`` of a factor quantemu chooses itself (not the compiler): exact log2.

    The compiler's float32 ``log`` rejects some exact powers of two; factors quantemu picks
    (EW lift, LUT output, leaky slope) are often such powers, so they use the exact split.
    """
    return split_scale(factor, how=ScaleSplit.EXACT)


@dataclass
class NvdlaContext(LoweringContext):
    """What NVDLA lowering knows while it walks the graph: the encodings assigned so far, and
    the ops its rule table supports (for the unsupported-op error)."""

    backend: ClassVar[str] = "nvdla"

    options: Options
    supported_ops: tuple[str, ...] = ()

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

    def unsupported(self, node: Node, what: str = "") -> UnsupportedError:
        """The error for a node NVDLA cannot run (and nvdla/sw would not put on the CPU)."""
        detail = f" ({what})" if what else ""
        return UnsupportedError(
            f"nvdla lowering: {node} uses {node.op_type}{detail}, which NVDLA cannot run and "
            f"nvdla/sw does not fall back for; supported ops: {', '.join(self.supported_ops)}"
        )

    def lowered(self, node: Node, layer: Layer) -> None:
        """Every NVDLA layer states its output encoding; the next rules read it."""
        self.encodings[layer.output] = layer.encoding

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
