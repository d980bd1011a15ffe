"""XMOS XS3 (lib_nn a5f0c8b) integer operators, bit-exact against XMOS's x86 reference.

Importing this package registers the conformance adapters of every operator
(``conformance/xs3.md``). See ``README.md`` in this directory for sources, semantics, the two
models and the divergences from the seed notes.
"""

from quantemu.backends.registry import BackendSpec
from quantemu.backends.xs3 import conformance  # noqa: F401 (importing registers the operators)
from quantemu.backends.xs3.bso import BsoChannels, pack_bso, unpack_bso
from quantemu.backends.xs3.conv import (
    conv2d_1x1,
    conv2d_deep,
    conv2d_depthwise,
    conv2d_shallowin,
)
from quantemu.backends.xs3.fc import (
    fc_deepin_shallowout_8,
    fc_deepin_shallowout_16,
    fully_connected_8,
    fully_connected_16,
)
from quantemu.backends.xs3.lower import Options, header, lower, prepare
from quantemu.backends.xs3.params import ConvParams, Model, OutputOptions, Window, YParams
from quantemu.backends.xs3.quantize import (
    DerivedParams,
    ErrorReport,
    accumulator_range,
    derive_bso,
    layer_error,
    pipeline_error,
    split_multiplier,
)
from quantemu.backends.xs3.result import OpResult

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="xs3",
    target="XMOS xcore.ai (XS3 VPU): xcore-opt 1.4.2 (xformer) and lib_nn, or tflite2xcore's BSO",
    scheme="TFLite int8 (the model's own, else the converter's), lowered as xcore-opt does",
    options=Options,
    lower=lower,
    header=header,
    prepare=prepare,
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
