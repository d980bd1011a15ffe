"""The tflite2xcore (BSO) rule table: graph op type -> rule, and the float fallback.

Each rule is ``rule(ctx, node) -> Layer`` (:mod:`quantemu.program.lowering`), on the shared
:class:`~quantemu.backends.xs3.lower.context.Xs3Context`:

==========================================  ==================================================
graph op                                    XS3 layer (module)
==========================================  ==================================================
Conv (group 1), 1x1 unit stride, no pads    ``conv2d_1x1`` (:mod:`.conv`)
Conv, ``K_w * C_in <= 32``, C_in 4/8/16/32  ``conv2d_shallowin``
Conv, depthwise (group = C_in = C_out)      ``conv2d_depthwise``
Conv, other                                 ``conv2d_deep``
Gemm, MatMul with constant 2-D weights      ``fully_connected_8``
MaxPool                                     ``maxpool2d`` / TFLite's reference, exact
                                            (:mod:`.pool`)
AveragePool                                 lib_nn ``avgpool2d`` (VALID, C % 4 == 0), else
                                            TFLite-Micro's AVERAGE_POOL_2D (:mod:`.tflite_micro`,
                                            ``exact=False``)
GlobalAveragePool, ReduceMean over H, W     lib_nn ``avgpool2d_global`` (C % 4 == 0)
Add, Sub                                    TFLite-Micro's ADD/SUB (:mod:`.tflite_micro`,
                                            ``exact=False``)
Pad                                         TFLite-Micro's PAD (a copy), exact
Relu, Clip, Sigmoid, Tanh (standalone)      ``lookup8`` with tflite2xcore's table
                                            (:mod:`.activation`)
Flatten, Reshape, Transpose, Identity       the same codes, exact (:mod:`.layout`)
Softmax, Mul, Concat, Resize, ...           float fallback (:mod:`.fallback`, ``exact=False``,
                                            with a note)
==========================================  ==================================================

A rule that finds no lib_nn or TFLite-Micro form for its node raises
:class:`~quantemu.program.lowering.NotLowerable`; the table then builds the float fallback, as
it does for the ops in :data:`~.fallback.FALLBACK_OPS`, which have no rule. Any other op is the
table's :class:`~quantemu.errors.UnsupportedError`, which lists the supported ones.
"""

from __future__ import annotations

from quantemu.backends.refusals import recurrent_refusals
from quantemu.backends.tflite.lower.rules import lower_pad
from quantemu.backends.xs3.bso.lower.activation import LUT_OPS, lower_lookup
from quantemu.backends.xs3.bso.lower.conv import lower_conv, lower_dense
from quantemu.backends.xs3.bso.lower.fallback import FALLBACK_OPS, lower_float
from quantemu.backends.xs3.bso.lower.layout import MOVES, lower_move
from quantemu.backends.xs3.bso.lower.pool import (
    lower_average_pool,
    lower_global_avgpool,
    lower_maxpool,
)
from quantemu.backends.xs3.bso.lower.tflite_micro import lower_add
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.program.lowering import RuleTable

RULES: RuleTable[Xs3Context] = RuleTable(
    rules={
        "Conv": lower_conv,
        "Gemm": lower_dense,
        "MatMul": lower_dense,
        "Add": lower_add,
        "Sub": lower_add,
        "MaxPool": lower_maxpool,
        "AveragePool": lower_average_pool,
        "GlobalAveragePool": lower_global_avgpool,
        "ReduceMean": lower_global_avgpool,
        "Pad": lower_pad,  # TFLite-Micro's PAD (a copy with the value's code): exact
        **dict.fromkeys(MOVES, lower_move),
        **dict.fromkeys(LUT_OPS, lower_lookup),
    },
    fallback=lower_float,
    fallback_ops=dict.fromkeys(FALLBACK_OPS, ""),
    refused=recurrent_refusals("xs3"),
)
