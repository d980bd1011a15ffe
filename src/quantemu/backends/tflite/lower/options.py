"""The ``tflite`` backend's options: which implementation of TFLite's int8 kernels.

Built from keyword options or ``--option`` text by
:meth:`~quantemu.program.options.LoweringOptions.from_mapping` (unknown names are errors that
list these fields; values are typed by the field).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Protocol, runtime_checkable

from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.errors import UnsupportedError
from quantemu.program.options import LoweringOptions


@runtime_checkable
class TfliteFamilyOptions(Protocol):
    """What the options of a target built on TFLite's kernels supply to the ``tflite`` rules.

    The rules (``tflite/lower/rules.py`` and its neighbours) run unchanged for every target of
    the TFLite family (``tflite`` itself; ``xs3``, whose xcore-opt path leaves TFLite-Micro
    kernels in the model): they read the target's choices through these four properties only,
    and :class:`~quantemu.backends.tflite.lower.context.TfliteContext` refuses options that
    lack one. ARCHITECTURE.md ("The TFLite family") says how a new target supplies them.
    """

    @property
    def kernel_runtime(self) -> TfliteRuntime:
        """Which runtime's kernels and Prepare-time derivations the builtin operators follow
        (LiteRT's reference kernels or TFLite-Micro's)."""

    @property
    def inplace_calibration(self) -> bool:
        """Whether the ranges were observed as TensorFlow's calibrator logs them where LiteRT's
        float ADD/SUB/MUL write their output into an input's buffer."""

    @property
    def fc_first_channel_scale(self) -> bool:
        """Whether per-channel FULLY_CONNECTED weights run with channel 0's scale for every
        channel (XMOS's runtime)."""

    @property
    def missing_builtins(self) -> frozenset[str]:
        """The TFLite builtins the target's runtime registers no kernel for (their rules
        refuse them with the runtime's own message)."""


#: What XMOS's host interpreter (xmos-ai-tools 1.4.2) lacks among the builtins quantemu lowers.
XMOS_HOST_MISSING = frozenset({"BATCH_MATMUL", "SQUARED_DIFFERENCE"})


class KernelSet(Enum):
    """Which of TFLite's kernel sets runs the model.

    ``reference``: the reference kernels (LiteRT with ``OpResolverType.BUILTIN_REF``,
    TFLite-Micro), emulated bit for bit. ``optimized``: LiteRT's default kernels (ruy/XNNPACK);
    they differ from the reference by 1-2 LSB on CONV_2D and DEPTHWISE_CONV_2D and are not yet
    emulated: choosing them is an error that says so.
    """

    REFERENCE = "reference"
    OPTIMIZED = "optimized"


class Runtime(Enum):
    """Which runtime's reference kernels run the model.

    ``litert_reference``: LiteRT with ``OpResolverType.BUILTIN_REF``. ``tflite_micro``:
    TFLite-Micro (they differ on a few operators; see the README). ``xmos_tflite_micro``: the
    TFLite-Micro inside XMOS's runtime (xmos-ai-tools 1.4.2) running an int8 model that
    xcore-opt has not compiled: TFLite-Micro's kernels, except that FULLY_CONNECTED with
    per-channel weights runs with the first channel's scale for every channel (checked on the
    XMOS host interpreter: every ``y_xcore_on_int8`` of the reference sets).
    """

    LITERT_REFERENCE = "litert_reference"
    TFLITE_MICRO = "tflite_micro"
    XMOS_TFLITE_MICRO = "xmos_tflite_micro"


@dataclass(frozen=True)
class Options(LoweringOptions):
    """``runtime``: :class:`Runtime` (default ``litert_reference``). ``kernels``:
    :class:`KernelSet`."""

    backend: ClassVar[str] = "tflite"

    runtime: Runtime = Runtime.LITERT_REFERENCE
    kernels: KernelSet = KernelSet.REFERENCE

    @property
    def kernel_runtime(self) -> TfliteRuntime:
        """The kernel family the parameter derivations and kernels follow."""
        if self.runtime is Runtime.LITERT_REFERENCE:
            return TfliteRuntime.LITERT_REFERENCE
        return TfliteRuntime.TFLITE_MICRO

    @property
    def inplace_calibration(self) -> bool:
        """Ranges as TensorFlow 2.17's calibrator logs them on in-place ADD/SUB/MUL (see
        ``TfliteContext._overwritten_by``)."""
        return True

    @property
    def fc_first_channel_scale(self) -> bool:
        """Per-channel FULLY_CONNECTED weights run with channel 0's scale (XMOS's runtime)."""
        return self.runtime is Runtime.XMOS_TFLITE_MICRO

    @property
    def missing_builtins(self) -> frozenset[str]:
        """XMOS's host interpreter lacks some builtins; LiteRT and TFLite-Micro have them."""
        return XMOS_HOST_MISSING if self.runtime is Runtime.XMOS_TFLITE_MICRO else frozenset()

    def __post_init__(self) -> None:
        if self.kernels is KernelSet.OPTIMIZED:
            raise UnsupportedError(
                "tflite option kernels=optimized: LiteRT's optimized kernels (1-2 LSB from the "
                "reference ones on conv and depthwise) are not emulated yet; use "
                "kernels=reference (LiteRT BUILTIN_REF, TFLite-Micro)"
            )
