"""What NVIDIA's compiler (nvdla/sw) refuses outright, with its own reason, for both precisions.

nvdla/sw's compiler reads Caffe models: ``umd/core/src/compiler/caffe/CaffeParser.cpp``'s parse
table has Convolution, Pooling, InnerProduct, ReLU, Softmax, LRN, Power, Eltwise, Concat,
Deconvolution, Sigmoid, TanH, BatchNorm and Scale (Dropout, Input and Flatten handled inline);
any other layer type stops the parse ("could not parse layer type ..."). The compiler has no
pass that rewrites a layer into others, so an operator without such a layer is an error, never
a float stand-in (a number no NVDLA deployment produces).
"""

from __future__ import annotations

from quantemu.backends.refusals import missing_layers

_PARSE_TABLE = (
    "nvdla/sw's Caffe parser has no {layer} layer (its parse table: Convolution, Pooling, "
    "InnerProduct, ReLU, Softmax, LRN, Power, Eltwise, Concat, Deconvolution, Sigmoid, TanH, "
    'BatchNorm, Scale) and stops with "could not parse layer type"; the compiler rewrites no '
    "layer into others. {remedy}"
)

REFUSED = missing_layers(
    "nvdla",
    _PARSE_TABLE,
    {
        "HardSwish": (
            "hard-swish",
            "Retrain with ReLU (or ReLU6 as Clip) in its place, or run it on the host",
        ),
        "HardSigmoid": (
            "hard-sigmoid",
            "Retrain with Sigmoid (the SDP's LUT) in its place, or run it on the host",
        ),
        # The CDMA and the PDP pad only with a constant value.
        "BorderPad": (
            "padding",
            "NVDLA's CDMA and PDP pad only with a constant value: pad on the host or retrain "
            "with zero padding",
        ),
    },
)
