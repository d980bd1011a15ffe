"""1-D convolutions and pools (input ``(N, C, L)``, kernel ``(k,)``, as PyTorch exports
``nn.Conv1d``, ``nn.MaxPool1d`` and ``nn.AvgPool1d``) imported as the 2-D op on
``(N, C, 1, L)``, so that every backend lowers them as 2-D with no change.

A 1-D node ``Y = Op(X, W, B)`` becomes ``X/2d = Unsqueeze(X, [2])``, ``Y/2d = Op(X/2d, W', B)``
and ``Y = Squeeze(Y/2d, [2])``; its attributes gain a leading entry for the added axis of size 1
(kernel 1, stride 1, dilation 1, no padding), and ``ceil_mode``, ``count_include_pad``,
``group`` and ``auto_pad`` carry over unchanged (SAME pads nothing on an axis of size 1 with a
kernel of 1). A constant weight ``(M, C/g, k)`` is stored as ``(M, C/g, 1, k)`` under its own
name when only 1-D nodes read it, so its quantization override (per output channel, axis 0)
still applies; a weight computed at run time gets its own Unsqueeze.

This runs on the raw nodes before normalization: the kernel's rank (the ``kernel_shape``
attribute, else the constant weight's) says a node is 1-D without any tensor shape.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantemu.graph.ir import QuantOverride
from quantemu.graph.onnx_attrs import RawNode

_LIFTED = ("Conv", "MaxPool", "AveragePool")
#: Attribute -> the entry the added axis of size 1 takes (pads take one before each end).
_LEADING = {"kernel_shape": 1, "strides": 1, "dilations": 1}
_AXIS = 2


def lift_1d(
    nodes: list[RawNode],
    consts: dict[str, np.ndarray],
    overrides: dict[str, QuantOverride],
    opset: int,
    input_ranks: dict[str, int],
) -> tuple[list[RawNode], dict[str, QuantOverride]]:
    """``nodes`` with every 1-D Conv/MaxPool/AveragePool as Unsqueeze, the 2-D op, Squeeze;
    ``consts`` gains the reshaped weights (and the axes constants), and the overrides of the
    weights reshaped in place follow them. ``input_ranks``: the graph inputs' ranks."""
    ranks = {**input_ranks, **{k: v.ndim for k, v in consts.items()}}
    one_d = [n for n in nodes if _is_1d(n, ranks)]
    if not one_d:
        return nodes, overrides
    weights = _weights_read_only_by(one_d, nodes, consts)
    overrides = dict(overrides)
    for name in weights:
        consts[name] = np.expand_dims(consts[name], _AXIS)
        if name in overrides and overrides[name].values is not None:
            values = np.expand_dims(overrides[name].values, _AXIS)
            overrides[name] = dataclasses.replace(overrides[name], values=values)
    lifted = {id(n) for n in one_d}
    out: list[RawNode] = []
    for node in nodes:
        out.extend(_lift(node, consts, weights, opset) if id(node) in lifted else [node])
    return out, overrides


def _is_1d(node: RawNode, ranks: dict[str, int]) -> bool:
    """The kernel is 1-D: by ``kernel_shape``, else a Conv's weight or input of known rank 3
    (a constant or a graph input: no shape is inferred yet)."""
    if node.op_type not in _LIFTED or node.domain not in ("", "ai.onnx"):
        return False
    if "kernel_shape" in node.attrs:
        return len(node.attrs["kernel_shape"]) == 1
    known = [ranks[n] for n in node.inputs[:2] if n in ranks]
    return node.op_type == "Conv" and bool(known) and known[0] == 3


def _weights_read_only_by(one_d, nodes, consts) -> set[str]:
    """The constant weights of 1-D convolutions that no other node (nor input slot) reads."""
    convs = [n for n in one_d if n.op_type == "Conv" and len(n.inputs) > 1]
    candidates = {n.inputs[1] for n in convs if n.inputs[1] in consts}
    conv_ids = {id(n) for n in convs}
    for node in nodes:
        reads = node.inputs[:1] + node.inputs[2:] if id(node) in conv_ids else node.inputs
        candidates -= set(reads)
    return {w for w in candidates if consts[w].ndim == 3}


def _lift(node: RawNode, consts, weights: set[str], opset: int) -> list[RawNode]:
    """Unsqueeze(s), the 2-D op and its Squeeze, named after ``node``."""
    before = [_reshape("Unsqueeze", f"{node.name}/unsqueeze", node.inputs[0], consts, opset)]
    inputs = [before[0].outputs[0], *node.inputs[1:]]
    if node.op_type == "Conv" and len(inputs) > 1 and inputs[1] not in weights:
        before.append(_reshape("Unsqueeze", f"{node.name}/unsqueeze_w", inputs[1], consts, opset))
        inputs[1] = before[-1].outputs[0]
    output_2d = f"{node.name}/output_2d"
    core = RawNode(
        node.name, node.op_type, node.domain, tuple(inputs), (output_2d,), _attrs_2d(node.attrs)
    )
    after = _reshape("Squeeze", f"{node.name}/squeeze", output_2d, consts, opset)
    after = dataclasses.replace(after, outputs=node.outputs[:1])
    return [*before, core, after]


def _attrs_2d(attrs: dict) -> dict:
    lifted = dict(attrs)
    for key, lead in _LEADING.items():
        if key in attrs:
            lifted[key] = [lead, *(int(v) for v in attrs[key])]
    if "pads" in attrs:
        begin, end = (int(p) for p in attrs["pads"])
        lifted["pads"] = [0, begin, 0, end]
    return lifted


def _reshape(op_type: str, name: str, source: str, consts, opset: int) -> RawNode:
    """``op_type`` (Unsqueeze or Squeeze) of axis 2: an attribute before opset 13, a constant
    input from 13 on."""
    output = f"{name}/output"
    if opset < 13:
        return RawNode(name, op_type, "", (source,), (output,), {"axes": [_AXIS]})
    axes = f"{name}/axes"
    consts[axes] = np.array([_AXIS], dtype=np.int64)
    return RawNode(name, op_type, "", (source, axes), (output,), {})
