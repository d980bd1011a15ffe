"""The ``tflite`` backend's options: which implementation of TFLite's int8 kernels.

Built from keyword options or ``--option`` text by
:meth:`~quantemu.program.options.LoweringOptions.from_mapping` (unknown names are errors that
list these fields; values are typed by the field).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.errors import UnsupportedError
from quantemu.program.options import LoweringOptions


class KernelSet(Enum):
    """Which of TFLite's kernel sets runs the model.

    ``reference``: the reference kernels (LiteRT with ``OpResolverType.BUILTIN_REF``,
    TFLite-Micro), emulated bit for bit. ``optimized``: LiteRT's default kernels (ruy/XNNPACK);
    they differ from the reference by 1-2 LSB on CONV_2D and DEPTHWISE_CONV_2D and are not yet
    emulated: choosing them is an error that says so.
    """

    REFERENCE = "reference"
    OPTIMIZED = "optimized"


@dataclass(frozen=True)
class Options(LoweringOptions):
    """``runtime``: :class:`TfliteRuntime`, ``litert_reference`` (default) or ``tflite_micro``
    (they differ on a few operators; see the README). ``kernels``: :class:`KernelSet`."""

    backend: ClassVar[str] = "tflite"

    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE
    kernels: KernelSet = KernelSet.REFERENCE

    def __post_init__(self) -> None:
        if self.kernels is KernelSet.OPTIMIZED:
            raise UnsupportedError(
                "tflite option kernels=optimized: LiteRT's optimized kernels (1-2 LSB from the "
                "reference ones on conv and depthwise) are not emulated yet; use "
                "kernels=reference (LiteRT BUILTIN_REF, TFLite-Micro)"
            )
