"""What NVIDIA's compiler (nvdla/sw) refuses outright, with its own reason, for both precisions.

nvdla/sw's compiler reads Caffe models: ``umd/core/src/compiler/caffe/CaffeParser.cpp``'s parse
table has Convolution, Pooling, InnerProduct, ReLU, Softmax, LRN, Power, Eltwise, Concat,
Deconvolution, Sigmoid, TanH, BatchNorm and Scale (Dropout, Input and Flatten handled inline);
any other layer type stops the parse ("could not parse layer type ..."). The compiler has no
pass that rewrites a layer into others, so an operator without such a layer is an error, never
a float stand-in (a number no NVDLA deployment produces).
"""

from __future__ import annotations

from types import MappingProxyType

from quantemu.backends.recurrent_refusals import recurrent_refusals

_PARSE_TABLE = (
    "nvdla/sw's Caffe parser has no {layer} layer (its parse table: Convolution, Pooling, "
    "InnerProduct, ReLU, Softmax, LRN, Power, Eltwise, Concat, Deconvolution, Sigmoid, TanH, "
    'BatchNorm, Scale) and stops with "could not parse layer type"; the compiler rewrites no '
    "layer into others. {remedy}"
)

REFUSED = MappingProxyType(
    {
        **recurrent_refusals("nvdla"),
        "HardSwish": _PARSE_TABLE.format(
            layer="hard-swish",
            remedy="Retrain with ReLU (or ReLU6 as Clip) in its place, or run it on the host",
        ),
        "HardSigmoid": _PARSE_TABLE.format(
            layer="hard-sigmoid",
            remedy="Retrain with Sigmoid (the SDP's LUT) in its place, or run it on the host",
        ),
        # The CDMA and the PDP pad only with a constant value.
        "BorderPad": "ONNX Pad with mode 'reflect' or 'edge' copies border values; "
        + _PARSE_TABLE.format(
            layer="padding",
            remedy="NVDLA's CDMA and PDP pad only with a constant value: pad on the host or "
            "retrain with zero padding",
        ),
    }
)
