"""The onednn rule table: graph op -> rule, the float fallback for every other op, and the
error of ``fallback="error"``."""

from __future__ import annotations

from quantemu.backends.onednn.lower.activation import lower_clamp
from quantemu.backends.onednn.lower.context import Context
from quantemu.backends.onednn.lower.conv import lower_conv
from quantemu.backends.onednn.lower.elementwise import lower_add, lower_mul
from quantemu.backends.onednn.lower.fallback import lower_fallback
from quantemu.backends.onednn.lower.hard import lower_hardsigmoid, lower_hardswish
from quantemu.backends.onednn.lower.layout import lower_reshape
from quantemu.backends.onednn.lower.linear import lower_linear
from quantemu.backends.onednn.lower.norm import lower_layer_norm
from quantemu.backends.onednn.lower.pool import (
    lower_avg_pool,
    lower_global_avg_pool,
    lower_max_pool,
)
from quantemu.backends.onednn.lower.recurrent import lower_recurrent
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.graph.ops import OPS
from quantemu.program.lowering import RuleTable

_RULES = {
    "Conv": lower_conv,
    "Gemm": lower_linear,
    "MatMul": lower_linear,
    "Add": lower_add,
    "LayerNormalization": lower_layer_norm,
    "Mul": lower_mul,
    "MaxPool": lower_max_pool,
    "AveragePool": lower_avg_pool,
    "GlobalAveragePool": lower_global_avg_pool,
    "Relu": lower_clamp,
    "HardSwish": lower_hardswish,
    "HardSigmoid": lower_hardsigmoid,
    "Clip": lower_clamp,
    "Flatten": lower_reshape,
    "Reshape": lower_reshape,
    "Transpose": lower_reshape,
    "Squeeze": lower_reshape,
    "Unsqueeze": lower_reshape,
    "Gather": lower_reshape,
    "Slice": lower_reshape,
    "Expand": lower_reshape,
    "Identity": lower_reshape,
    "Dropout": lower_reshape,
    "LSTM": lower_recurrent,
    "GRU": lower_recurrent,
}

_NO_RULE = "no integer lowering for this operator"


def _unsupported(ctx: Context, node: Node, why: str) -> UnsupportedError:
    remedy = "" if ctx.allows_fallback() else " (pass fallback='float' to run the rest in float)"
    return UnsupportedError(
        f"node {node.name!r} ({node.op_type}): {why or _NO_RULE}; integer lowerings exist for "
        f"{', '.join(sorted(_RULES))}{remedy}"
    )


#: Every op the graph executor runs falls back to float when it has no rule (or its rule finds
#: a form PyTorch's quantized kernels do not cover).
RULES: RuleTable[Context] = RuleTable(
    rules=_RULES,
    fallback=lower_fallback,
    fallback_ops={op: _NO_RULE for op in OPS if op not in _RULES},
    unsupported=_unsupported,
)
