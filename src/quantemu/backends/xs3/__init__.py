"""XMOS XS3 (xcore.ai VPU), bit for bit as either XMOS toolchain generation builds a model.

- :mod:`.xformer`: xcore-opt 1.4.2 (``toolchain=xformer``, the default): the XC ops' compile-time
  parameters and run-time arithmetic, and its lowering (:mod:`.xformer.lower`).
- :mod:`.bso`: the older tflite2xcore's lib_nn ``a5f0c8b`` operators with the Bias-Scale-Offset
  output stage, bit-exact against XMOS's x86 reference, and their lowering (:mod:`.bso.lower`).
  Their public functions are re-exported here, and importing this package registers their
  conformance adapters (``conformance/xs3.md``).
- :mod:`.lower`: what both lowerings share: the options, the context, and ``lower``, which
  picks the generation's rule table.

See ``README.md`` in this directory for sources, semantics, the two models and the divergences
from the seed notes.
"""

from quantemu.backends.registry import BackendSpec
from quantemu.backends.xs3.bso import conformance  # noqa: F401 (importing registers the operators)
from quantemu.backends.xs3.bso.conv import (
    conv2d_1x1,
    conv2d_deep,
    conv2d_depthwise,
    conv2d_shallowin,
)
from quantemu.backends.xs3.bso.fc import (
    fc_deepin_shallowout_8,
    fc_deepin_shallowout_16,
    fully_connected_8,
    fully_connected_16,
)
from quantemu.backends.xs3.bso.packing import BsoChannels, pack_bso, unpack_bso
from quantemu.backends.xs3.bso.params import ConvParams, Model, OutputOptions, Window, YParams
from quantemu.backends.xs3.bso.quantize import (
    DerivedParams,
    ErrorReport,
    accumulator_range,
    derive_bso,
    layer_error,
    pipeline_error,
    split_multiplier,
)
from quantemu.backends.xs3.bso.result import OpResult
from quantemu.backends.xs3.lower import toolchains
from quantemu.backends.xs3.lower.options import Options

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="xs3",
    target="XMOS xcore.ai (XS3 VPU): xcore-opt 1.4.2 (xformer) and lib_nn, or tflite2xcore's BSO",
    scheme="TFLite int8 (the model's own, else the converter's), lowered as xcore-opt does",
    options=Options,
    lower=toolchains.lower,
    header=toolchains.header,
    prepare=toolchains.prepare,
)

__all__ = [
    "BACKEND",
    "BsoChannels",
    "ConvParams",
    "DerivedParams",
    "ErrorReport",
    "Model",
    "OpResult",
    "OutputOptions",
    "Window",
    "YParams",
    "accumulator_range",
    "conv2d_1x1",
    "conv2d_deep",
    "conv2d_depthwise",
    "conv2d_shallowin",
    "derive_bso",
    "fc_deepin_shallowout_8",
    "fc_deepin_shallowout_16",
    "fully_connected_8",
    "fully_connected_16",
    "layer_error",
    "pack_bso",
    "pipeline_error",
    "split_multiplier",
    "unpack_bso",
]
