"""Normalizers of LSTM and GRU (the kernels are in
:mod:`quantemu.graph.ops.recurrent`, whose docstring states the normalized form).

quantemu runs the ONNX definitions with their default activations, no clipping, no peepholes,
full-length sequences and the sequence-major layout 0; anything else is refused here, naming
the value and what to do, rather than computed differently. ``layout`` and ``input_forget`` are
not kept: they are always 0 in the IR, and leaving them out keeps the node writable back to ONNX
at every opset (LSTM-7 has no ``layout``).
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.graph.onnx_attrs.base import Context, RawNode, normalizer
from quantemu.graph.onnx_attrs.opsets import REVIEWED
from quantemu.graph.ops._spec import known
from quantemu.graph.ops.recurrent import DIRECTIONS, SEQUENCE_LENS, num_directions

# LSTM-7/GRU-7 -> 14 added ``layout``; 22 only widened the types (bfloat16).
REVIEWED.update({"LSTM": (7, 22), "GRU": (7, 22)})

#: The activations the kernels compute, per direction (ONNX's defaults).
DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh")}
#: ONNX input position of LSTM's peephole weights.
PEEPHOLE = 7
_COMMON = {"activation_alpha", "activation_beta", "activations", "clip", "direction"}
_OUTPUT_ROLES = ("Y", "Y_h", "Y_c")


@normalizer("LSTM", "GRU")
def _recurrent(raw: RawNode, ctx: Context) -> Node:
    lstm = raw.op_type == "LSTM"
    allowed = _COMMON | {"hidden_size", "input_forget" if lstm else "linear_before_reset"}
    raw.check_attrs(allowed | ({"layout"} if ctx.opset >= 14 else set()))
    _required_inputs(raw)
    direction = str(raw.attrs.get("direction", "forward"))
    if direction not in DIRECTIONS:
        raise InvalidInputError(
            f"{raw}: direction {direction!r} is not one of {', '.join(DIRECTIONS)}"
        )
    _check_layout(raw)
    _check_functions(raw, num_directions(direction))
    attrs = {"hidden_size": _hidden_size(raw, ctx), "direction": direction}
    if lstm:
        forget = int(raw.attrs.get("input_forget", 0))
        raw.require(
            forget == 0,
            f"input_forget {forget} (input and forget gates coupled) is not supported; "
            "quantemu supports LSTM with input_forget=0 (independent gates) only",
        )
        _check_peepholes(raw, ctx)
    else:
        attrs["linear_before_reset"] = _flag(raw, "linear_before_reset")
    _check_sequence_lens(raw, ctx)
    count = 7 if lstm else 6
    inputs = [name if i != SEQUENCE_LENS else "" for i, name in enumerate(raw.inputs[:count])]
    while inputs and not inputs[-1]:
        inputs.pop()
    return raw.make(inputs, attrs, _outputs(raw, ctx, 3 if lstm else 2))


def _required_inputs(raw: RawNode) -> None:
    for index, role in enumerate(("X", "W", "R")):
        if index >= len(raw.inputs) or not raw.inputs[index]:
            raise InvalidInputError(f"{raw}: input {index} ({role}) is required")


def _flag(raw: RawNode, key: str) -> int:
    value = int(raw.attrs.get(key, 0))
    if value not in (0, 1):
        raise InvalidInputError(f"{raw}: {key} {value} must be 0 or 1")
    return value


def _hidden_size(raw: RawNode, ctx: Context) -> int:
    """The attribute, or (ONNX's reference does this) R's last dimension when it is absent."""
    if "hidden_size" in raw.attrs:
        hidden = int(raw.attrs["hidden_size"])
    else:
        r_shape = ctx.info(raw, 2).shape
        if not r_shape or not known(r_shape[-1]):
            raise InvalidInputError(
                f"{raw}: attribute hidden_size is required (R has shape {r_shape})"
            )
        hidden = int(r_shape[-1])
    if hidden < 1:
        raise InvalidInputError(f"{raw}: hidden_size {hidden} must be >= 1")
    return hidden


def _check_layout(raw: RawNode) -> None:
    layout = int(raw.attrs.get("layout", 0))
    raw.require(
        layout == 0,
        f"layout {layout} (batch-major X, initial states and outputs) is not supported; "
        "quantemu takes layout 0 (X as seq_length x batch x input_size): export with layout 0 "
        "and Transpose nodes around the node (torch.onnx writes that for batch_first=True)",
    )


def _check_functions(raw: RawNode, directions: int) -> None:
    """Default activations (given or not), no activation_alpha/beta, no clip."""
    expected = list(DEFAULT_ACTIVATIONS[raw.op_type] * directions)
    given = raw.attrs.get("activations")
    if given is not None:
        names = [str(a) for a in given]
        raw.require(
            [a.lower() for a in names] == [a.lower() for a in expected],
            f"activations {names} are not supported; quantemu supports {raw.op_type} with the "
            f"default activations {expected} only: remove the attribute or re-export with them",
        )
    for key in ("activation_alpha", "activation_beta"):
        values = list(raw.attrs.get(key, ()))
        raw.require(
            not values,
            f"{key} {values} is not supported; the default activations {expected} take no "
            "parameters: remove the attribute",
        )
    raw.require(
        "clip" not in raw.attrs,
        f"clip {raw.attrs.get('clip')} (cell clipping) is not supported; quantemu computes "
        f"{raw.op_type} without clipping: remove the attribute (re-export without clip)",
    )


def _check_peepholes(raw: RawNode, ctx: Context) -> None:
    peep = ctx.const(raw, PEEPHOLE, "P")  # a computed P is refused by const, naming it
    if peep is None or not np.any(peep):
        return
    raise UnsupportedError(
        f"{raw}: peephole weights P {raw.inputs[PEEPHOLE]!r} are not zero (max |P| = "
        f"{float(np.max(np.abs(peep))):g}); quantemu supports LSTM without peepholes: omit P "
        "or make it all zero",
    )


def _check_sequence_lens(raw: RawNode, ctx: Context) -> None:
    """Only a constant ``sequence_lens`` equal to seq_length for every batch entry: a no-op."""
    lens_value = ctx.const(raw, SEQUENCE_LENS, "sequence_lens")  # refuses a computed one
    if lens_value is None:
        return
    x_shape = ctx.info(raw).shape
    if len(x_shape) != 3:
        return  # the shape function names X's rank
    seq, batch = x_shape[0], x_shape[1]
    lens = [int(v) for v in np.asarray(lens_value).reshape(-1)]
    if known(batch) and len(lens) != batch:
        raise InvalidInputError(
            f"{raw}: sequence_lens {raw.inputs[SEQUENCE_LENS]!r} has {len(lens)} entries, "
            f"X {raw.inputs[0]!r} a batch of {batch}"
        )
    raw.require(
        known(seq) and all(n == seq for n in lens),
        f"sequence_lens {lens} with seq_length {seq}: quantemu runs every sequence to its full "
        "length; give sequence_lens equal to seq_length for every batch entry, or omit it "
        "(run shorter sequences separately)",
    )


def _outputs(raw: RawNode, ctx: Context, count: int) -> list[str]:
    """Y, Y_h[, Y_c]: trailing unused ones dropped, an omitted earlier one named for the node."""
    names = list(raw.outputs[:count]) or [""]
    while len(names) > 1 and (not names[-1] or names[-1] not in ctx.used):
        names.pop()
    result = []
    for name, role in zip(names, _OUTPUT_ROLES, strict=False):
        fresh, k = f"{raw.name}/{role}", 0
        while not name and (fresh in ctx.tensors or fresh in ctx.used):
            k += 1
            fresh = f"{raw.name}/{role}_{k}"
        result.append(name or fresh)
    return result
