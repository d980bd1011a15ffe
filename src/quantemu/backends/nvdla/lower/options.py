"""The NVDLA lowering options: how weights are scaled, where convolutions rescale, and how the
compiler splits a float factor into an integer scale and shift.

Built by :meth:`~quantemu.program.options.LoweringOptions.from_mapping` (unknown names and
values are errors listing the choices); :meth:`Options.__post_init__` rejects the combination
the hardware cannot express.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from quantemu.backends.nvdla.quantize import ScaleSplit
from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions

__all__ = ["Options", "PipelinePrecision", "Rescale", "ScaleSplit", "WeightScaling"]


class PipelinePrecision(enum.Enum):
    """Which NVDLA pipeline the model runs on.

    ``INT8``: nvdla/sw's INT8 flow (calibrated scales, converters). ``FP16``: every unit in
    FP16 (``*_PRECISION = 2``), weights and activations as fp16 words, no calibration; the
    other options (weight scaling, rescale, scale split) have no meaning there.
    """

    INT8 = "int8"
    FP16 = "fp16"


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
    ``precision``: :class:`PipelinePrecision` (default ``int8``); ``fp16`` ignores the three
    INT8 options above.
    """

    backend: ClassVar[str] = "nvdla"

    weights: WeightScaling = WeightScaling.PER_KERNEL
    rescale: Rescale = Rescale.AUTO
    scale_split: ScaleSplit = ScaleSplit.NVDLA_COMPILER
    precision: PipelinePrecision = PipelinePrecision.INT8

    def __post_init__(self) -> None:
        for name, kind in (("weights", WeightScaling), ("rescale", Rescale),
                           ("scale_split", ScaleSplit),
                           ("precision", PipelinePrecision)):  # fmt: skip
            if not isinstance(getattr(self, name), kind):
                raise InvalidInputError(
                    f"nvdla lowering: option {name}={getattr(self, name)!r} is not valid; "
                    f"choose one of {', '.join(m.value for m in kind)}"
                )
        if self.precision is PipelinePrecision.FP16:
            changed = [
                f"{n}={getattr(self, n).value}"
                for n, default in (("weights", WeightScaling.PER_KERNEL),
                                   ("rescale", Rescale.AUTO),
                                   ("scale_split", ScaleSplit.NVDLA_COMPILER))
                if getattr(self, n) is not default
            ]  # fmt: skip
            if changed:
                raise InvalidInputError(
                    f"nvdla lowering: {', '.join(changed)} has no meaning with precision=fp16 "
                    "(no integer scales: weights and activations are fp16); drop it, or use "
                    "precision=int8"
                )
        if self.weights is WeightScaling.PER_FILTER and self.rescale is Rescale.OUTPUT_CONVERTER:
            raise InvalidInputError(
                "nvdla lowering: rescale=output_converter cannot express per-filter weight "
                "scales (one CVT_SCALE per layer); use rescale=auto or bs_mul, or "
                "weights=per_kernel"
            )
