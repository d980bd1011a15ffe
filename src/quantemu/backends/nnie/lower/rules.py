"""NNIE's rule table: which graph op becomes which layer (MQBench's NNIE deploy flow).

- :data:`~.codes.CODE_OPS` run on the codes (``codes:<Op>``, exact);
- :data:`~.quantized.COMPUTE_OPS` and :data:`~.quantized.SELECT_OPS` get NNIE clips
  (``nnie:<Op>``); a grouped Conv/ConvTranspose falls back unless ``grouped_conv="log"``;
- :data:`FLOAT_OPS`, MQBench's ``nnie_exclude_layer_type`` that need arithmetic, fall back by
  design (``float:<Op>``);
- anything else is an :class:`~quantemu.errors.UnsupportedError` naming the supported set.
"""

from __future__ import annotations

from quantemu.backends.nnie.lower.codes import CODE_OPS, code_rule
from quantemu.backends.nnie.lower.context import NnieContext
from quantemu.backends.nnie.lower.fallback import excluded, float_fallback
from quantemu.backends.nnie.lower.quantized import (
    COMPUTE_OPS,
    SELECT_OPS,
    compute_rule,
    conv_rule,
    select_rule,
)
from quantemu.backends.refusals import missing_layers
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program.lowering import RuleTable

# MQBench's nnie_exclude_layer_type that need arithmetic: float fallbacks.
FLOAT_OPS = ("Clip", "GlobalAveragePool", "Mul", "PRelu", "Sigmoid", "Softmax")
SUPPORTED_OPS = tuple(sorted(CODE_OPS + FLOAT_OPS + COMPUTE_OPS + SELECT_OPS))


_MAPPER = (
    "the NNIE mapper builds its network from Caffe layers, which have no {layer} layer, and "
    "MQBench's NNIE flow (mqbench/deploy/deploy_nnie.py) rewrites none (it only turns Resize "
    "into Upsample and removes fake pads); {remedy}"
)

#: What NNIE's toolchain cannot take at all: errors, never float stand-ins.
REFUSED = missing_layers(
    "nnie",
    _MAPPER,
    {
        "HardSwish": ("hard-swish", "retrain with ReLU in its place, or run it outside NNIE"),
        "HardSigmoid": (
            "hard-sigmoid",
            "retrain with Sigmoid in its place, or run it outside NNIE",
        ),
        # NNIE's convolution and pooling pad only with zeros.
        "BorderPad": ("padding", "pad on the host or retrain with zero padding"),
    },
)


def unsupported(ctx: NnieContext, node: Node, why: str) -> UnsupportedError:
    """The error for an op NNIE lowering has no rule for, with what to do about it."""
    reason = f" ({why})" if why else ""
    return UnsupportedError(
        f"nnie: {node} (operator {node.op_type}) cannot be lowered to NNIE{reason}; supported "
        f"operators: {', '.join(SUPPORTED_OPS)}. Replace it in the model (e.g. Div by a "
        "constant -> Mul by its reciprocal) or run it outside NNIE"
    )


RULES: RuleTable[NnieContext] = RuleTable(
    rules={
        **dict.fromkeys(CODE_OPS, code_rule),
        **dict.fromkeys(COMPUTE_OPS, compute_rule),
        **dict.fromkeys(SELECT_OPS, select_rule),
        "Conv": conv_rule,
        "ConvTranspose": conv_rule,
    },
    fallback=float_fallback,
    fallback_ops={op: excluded(f"{op} layers") for op in FLOAT_OPS},
    unsupported=unsupported,
    refused=REFUSED,
)
