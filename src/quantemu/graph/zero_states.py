"""Zero initial states of ONNX LSTM/GRU built at run time, dropped before import.

PyTorch exports ``nn.LSTM``/``nn.GRU`` without ``h0``/``c0`` as ``Shape(x) -> ... -> Concat ->
ConstantOfShape(0) -> Slice -> LSTM.initial_h``: zeros whose shape follows the batch. With a
symbolic batch (``dynamic_axes``) that chain cannot be folded to a constant, and the Slices on
the batch axis cannot be imported. An absent ``initial_h``/``initial_c`` *is* zeros (the ONNX
operator's definition), so the input is dropped instead, and the nodes that only fed it go with
it. Only chains that provably produce zeros are dropped: ``ConstantOfShape`` with no value or an
all-zero one, seen through ops that keep zeros zero.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from onnx import numpy_helper

from quantemu.graph.onnx_attrs import RawNode

RECURRENT = frozenset({"LSTM", "GRU", "RNN"})
STATE_INPUTS = (5, 6)  # initial_h, initial_c
# Ops whose output is all zeros when their first input is (the other inputs are shapes/indices).
ZERO_PRESERVING = frozenset({"Slice", "Squeeze", "Unsqueeze", "Reshape", "Identity", "Expand",
                             "Cast", "Transpose", "Gather"})  # fmt: skip


def _is_zero_chain(name: str, producers: dict[str, RawNode]) -> list[RawNode] | None:
    """The nodes from ``name`` back to an all-zero ``ConstantOfShape``, or None."""
    chain = []
    node = producers.get(name)
    while node is not None and node.op_type in ZERO_PRESERVING and node.inputs:
        chain.append(node)
        node = producers.get(node.inputs[0])
    if node is None or node.op_type != "ConstantOfShape":
        return None
    value = node.attrs.get("value")  # an ONNX TensorProto (default: one float 0)
    if value is not None:
        array = numpy_helper.to_array(value) if hasattr(value, "data_type") else value
        if np.any(np.asarray(array) != 0):
            return None
    return [*chain, node]


def drop_zero_states(nodes: list[RawNode], outputs: list[str]) -> list[RawNode]:
    """``nodes`` with the run-time zero initial states of recurrent nodes dropped (module
    docstring); unchanged when there is none."""
    producers = {o: n for n in nodes for o in n.outputs}
    dropped: list[RawNode] = []
    rewritten = {}
    for node in nodes:
        if node.op_type not in RECURRENT:
            continue
        inputs = list(node.inputs)
        for i in STATE_INPUTS:
            if i < len(inputs) and inputs[i] and (chain := _is_zero_chain(inputs[i], producers)):
                inputs[i] = ""
                dropped.extend(chain)
        if inputs != list(node.inputs):
            rewritten[id(node)] = replace(node, inputs=tuple(inputs))
    if not rewritten:
        return nodes
    kept = [rewritten.get(id(n), n) for n in nodes]
    return _prune(kept, dropped, outputs)


def _prune(nodes: list[RawNode], candidates: list[RawNode], outputs: list[str]) -> list[RawNode]:
    """Remove the candidates no remaining node reads, and then their producers likewise."""
    removed: set[int] = set()
    producers = {o: n for n in nodes for o in n.outputs}
    todo = list(candidates)
    while todo:
        node = todo.pop()
        if id(node) in removed:
            continue
        used = set(outputs) | {i for n in nodes if id(n) not in removed for i in n.inputs}
        if any(o in used for o in node.outputs):
            continue
        removed.add(id(node))
        todo.extend(producers[i] for i in node.inputs if i in producers)
    return [n for n in nodes if id(n) not in removed]
