"""oneDNN x86 int8 backend: what oneDNN 3.12 computes per instruction set (seed 002).

Importing the package registers the conformance operators (``conformance/onednn.md``). The public
API is the frozen parameters in :mod:`.params` and the pure operators below.
"""

from quantemu.backends.onednn import conformance as _conformance  # noqa: F401  (registers ops)
from quantemu.backends.onednn.conv import conv2d, rne_half
from quantemu.backends.onednn.family import (
    predict_conv_impl,
    predict_quantized_conv2d_impl,
    predict_quantized_linear_impl,
)
from quantemu.backends.onednn.lower import Options as LowerOptions
from quantemu.backends.onednn.lower import header as lower_header
from quantemu.backends.onednn.lower import lower
from quantemu.backends.onednn.matmul import AccumulatorResult, matmul
from quantemu.backends.onednn.overflow import (
    OverflowReport,
    Remedy,
    conv_overflow_risk,
    linear_overflow_risk,
)
from quantemu.backends.onednn.pairsum import PairSumResult, exact_matmul, pair_sum_matmul
from quantemu.backends.onednn.params import (
    AvgPool2dParams,
    Conv2dParams,
    ConvGeometry,
    ConvImpl,
    DotProduct,
    DstType,
    Isa,
    MatmulApi,
    MatmulParams,
    MaxPool2dParams,
    PoolImpl,
    QuantizedConv2dParams,
    QuantizedImpl,
    QuantizedLinearParams,
    ReorderParams,
    Requantization,
    SrcType,
)
from quantemu.backends.onednn.pool import avg_pool2d, max_pool2d
from quantemu.backends.onednn.quantize import (
    RnnDataQParams,
    activation_qparams,
    dequantize_rnn_data,
    quantize_rnn_data,
    quantize_rnn_weights,
    rnn_weights_scales,
    weight_scales,
)
from quantemu.backends.onednn.reorder import reorder
from quantemu.backends.onednn.requant import (
    QuantizedResult,
    quantized_conv2d,
    quantized_linear,
    requantize,
)
from quantemu.backends.onednn.rnn import RnnResult, gru, lstm
from quantemu.backends.onednn.rnn_params import RnnCell, RnnDirection, RnnParams
from quantemu.backends.registry import BackendSpec

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="onednn",
    target="oneDNN int8 on x86 as PyTorch runs it, per ISA",
    scheme=(
        "PyTorch x86 (engine onednn): u8 per-tensor affine activations, s8 per-channel "
        "symmetric weights"
    ),
    options=LowerOptions,
    lower=lower,
    header=lower_header,
    lint=None,
)

__all__ = [
    "BACKEND",
    "AccumulatorResult",
    "AvgPool2dParams",
    "Conv2dParams",
    "ConvGeometry",
    "ConvImpl",
    "DotProduct",
    "DstType",
    "Isa",
    "MatmulApi",
    "MatmulParams",
    "MaxPool2dParams",
    "OverflowReport",
    "PairSumResult",
    "PoolImpl",
    "QuantizedConv2dParams",
    "QuantizedImpl",
    "QuantizedLinearParams",
    "QuantizedResult",
    "Remedy",
    "ReorderParams",
    "Requantization",
    "RnnCell",
    "RnnDataQParams",
    "RnnDirection",
    "RnnParams",
    "RnnResult",
    "SrcType",
    "activation_qparams",
    "avg_pool2d",
    "conv2d",
    "conv_overflow_risk",
    "dequantize_rnn_data",
    "exact_matmul",
    "gru",
    "linear_overflow_risk",
    "lstm",
    "matmul",
    "max_pool2d",
    "pair_sum_matmul",
    "predict_conv_impl",
    "predict_quantized_conv2d_impl",
    "predict_quantized_linear_impl",
    "quantize_rnn_data",
    "quantize_rnn_weights",
    "quantized_conv2d",
    "quantized_linear",
    "reorder",
    "requantize",
    "rne_half",
    "rnn_weights_scales",
    "weight_scales",
]
