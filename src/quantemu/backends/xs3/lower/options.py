"""The XS3 lowering options: the lib_nn build and model variant, and the fused-activation clamp.

Built from keyword options or ``--option`` text by
:meth:`~quantemu.program.options.LoweringOptions.from_mapping` (unknown names are errors that
list these fields, values are typed by the field); :meth:`Options.__post_init__` checks what the
types alone do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.xs3.bso.params import Model, OutputOptions
from quantemu.backends.xs3.xformer.output_transform import DEFAULT_ERR_THRESHOLD
from quantemu.backends.xs3.xformer.runtime import VlashrRounding
from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions


class Toolchain(Enum):
    """Which XMOS toolchain generation builds the model.

    ``xformer``: xcore-opt (xmos-ai-tools 1.4.2), today's compiler: ``XC_conv2d_v2`` and lib_nn's
    output transform, the rest on TFLite-Micro's reference kernels. ``tflite2xcore``: the older
    converter's BSO operators (conv2d_deep/shallowin/1x1/depthwise, fully_connected_8).
    """

    XFORMER = "xformer"
    TFLITE2XCORE = "tflite2xcore"


@dataclass(frozen=True)
class Options(LoweringOptions):
    """The lowering options (``quantemu.compile(..., backend="xs3", **options)``).

    ``model``: :class:`~quantemu.backends.xs3.bso.params.Model` (or its string value),
    ``host_reference`` (default, what every conformance vector pins) or ``device``.
    ``symmetric_saturation``: lib_nn built with ``CONFIG_SYMMETRIC_SATURATION_*`` = 1, so int8
    outputs of the lib_nn operators lie in [-127, 127] (default False: [-128, 127]).
    ``activation_clamp``: apply TFLite's fused-activation range (ReLU: ``max(y, zp)``, ReLU6:
    also ``min(y, q(6))``) after a lib_nn convolution or fully-connected operator. Default False,
    as on XMOS's runtime: tflite2xcore drops the fused activation because the XC operators have
    no activation stage; the output range calibrated on the ReLU output makes the clamp implicit.
    Either way the ``activation_clamped`` counter says how many outputs the clamp moves (or would
    move). ``toolchain``: :class:`Toolchain` (default ``xformer``). ``conv_err_threshold``:
    xcore-opt's ``--xcore-conv-err-threshold`` (default 0.25). With ``toolchain=xformer``,
    ``model=device`` makes VLASHR truncate (unverified; the host interpreter rounds).
    """

    backend: ClassVar[str] = "xs3"

    model: Model = Model.HOST_REFERENCE
    symmetric_saturation: bool = False
    activation_clamp: bool = False
    toolchain: Toolchain = Toolchain.XFORMER
    conv_err_threshold: float = DEFAULT_ERR_THRESHOLD

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Model.parse(self.model, where="xs3 option model"))
        for name in ("symmetric_saturation", "activation_clamp"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise InvalidInputError(f"xs3 option {name} = {value!r}; use True or False")
        object.__setattr__(self, "toolchain", Toolchain(self.toolchain))
        self._check_toolchain()

    def _check_toolchain(self) -> None:
        """An option of the other toolchain generation would silently do nothing: an error."""
        if self.toolchain is Toolchain.XFORMER:
            bso_only = [n for n in ("symmetric_saturation", "activation_clamp") if getattr(self, n)]
            if bso_only:
                raise InvalidInputError(
                    f"xs3 option {', '.join(bso_only)} applies to lib_nn's BSO operators "
                    "(toolchain=tflite2xcore); the default xformer toolchain has no such switch. "
                    "Add toolchain=tflite2xcore, or drop the option"
                )
        elif self.conv_err_threshold != DEFAULT_ERR_THRESHOLD:
            raise InvalidInputError(
                "xs3 option conv_err_threshold is xcore-opt's (toolchain=xformer); tflite2xcore "
                "has no error threshold"
            )
        if not self.conv_err_threshold >= 0:
            raise InvalidInputError(
                f"xs3 option conv_err_threshold = {self.conv_err_threshold!r}; use a number >= 0"
            )

    @property
    def kernel_runtime(self) -> TfliteRuntime:
        """The builtin kernels xformer leaves in the model run on TFLite-Micro."""
        return TfliteRuntime.TFLITE_MICRO

    @property
    def inplace_calibration(self) -> bool:
        """xformer: today's TensorFlow converter, whose calibrator sees in-place ADD/SUB/MUL
        widen their inputs' ranges; tflite2xcore's generation predates in-place kernels."""
        return self.toolchain is Toolchain.XFORMER

    @property
    def fc_first_channel_scale(self) -> bool:
        """False: xformer turns every FULLY_CONNECTED into XC_conv2d_v2 (or, reverted, a 1x1
        CONV_2D, per channel), so XMOS's per-tensor FC quirk never runs."""
        return False

    @property
    def missing_builtins(self) -> frozenset[str]:
        """None: every builtin xcore-opt leaves is lowered with TFLite-Micro's kernel (what
        the compiler itself refuses, BATCH_MATMUL of activations and GELU, the xformer rules
        refuse). XMOS's host interpreter lacks SQUARED_DIFFERENCE (tests/peers skip those
        runs); whether the device's runtime has it is not established."""
        return frozenset()

    @property
    def vlashr(self) -> VlashrRounding:
        """How the xformer path's final VLASHR rounds: the host rounds; the device may not."""
        return VlashrRounding.DEVICE_TRUNCATE if self.model is Model.DEVICE else VlashrRounding.HOST

    @property
    def output_options(self) -> OutputOptions:
        """The lib_nn operators' variant switches."""
        return OutputOptions(self.symmetric_saturation, self.model)

    @property
    def output_low(self) -> int:
        """The lowest int8 output of the lib_nn operators."""
        return -127 if self.symmetric_saturation else -128
