"""xcore-opt's activation fusion: ``RELU(MINIMUM(conv, 127))`` becomes one convolution.

Two of xformer's TFLite rewrites (``Transforms/TFLPatterns.td``) run before it builds its XC
ops: ``RELU(MINIMUM(x, c))`` is ``RELU(x)`` when the constant ``c`` is a splat of code 127 (the
minimum never bites), and ``RELU(CONV_2D(...))`` is ``CONV_2D(..., fused_activation=RELU)``.
TensorFlow's converter writes a hard-sigmoid after a convolution (MobileNetV3's gates) as
exactly that chain, its multiply and add folded into the convolution. The fused convolution
then quantizes its output on RELU's output quantization directly, where the unfused chain
rounds twice (CONV_2D on its own scale, then RELU's requantization): the codes differ.

:func:`fused_relu_chain` finds the chain at a Conv; :func:`absorb` gives the convolution the
RELU's output quantization and a fused ReLU, and marks the MINIMUM and RELU nodes so that
their rules only pass the convolution's codes on.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.lower.layers import MoveLayer
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.graph.ir import Attrs, Node
from quantemu.program import Layer


def _min_is_noop(ctx: Xs3Context, node: Node) -> bool:
    """MINIMUM with a second operand that is a splat of code 127 on the first's scale."""
    if node.op_type != "Min" or len(node.inputs) != 2:
        return False
    const = ctx.const(node.inputs[1])
    if const is None:
        return False
    override = ctx.graph.quant_overrides.get(node.inputs[1])
    if override is not None and override.values is not None:
        codes = np.asarray(override.values)
    else:
        codes = ctx.encoding(node.inputs[0]).quantize(np.asarray(const, np.float32))
    return bool(np.all(np.asarray(codes) == 127))


def fused_relu_chain(ctx: Xs3Context, node: Node) -> list[Node]:
    """The MINIMUM (if any) and RELU xcore-opt fuses into Conv ``node``; empty when none."""
    if node.op_type != "Conv" or node.attrs.get("group", 1) != 1 or "activation" in node.attrs:
        return []
    chain: list[Node] = []
    tensor = node.outputs[0]
    for _ in range(2):
        readers = ctx.graph.consumers(tensor)
        if tensor in ctx.graph.outputs or len(readers) != 1:
            return []
        reader = readers[0]
        if reader.op_type == "Relu":
            return [*chain, reader]
        if chain or not _min_is_noop(ctx, reader):
            return []
        chain.append(reader)
        tensor = reader.outputs[0]
    return []


def absorb(ctx: Xs3Context, node: Node) -> Node:
    """``node`` with the fused ReLU of its chain, its output on the RELU's quantization; the
    chain's nodes are marked absorbed. ``node`` itself where there is no chain."""
    chain = fused_relu_chain(ctx, node)
    if not chain:
        return node
    relu_encoding = ctx.encoding(chain[-1].outputs[0])
    for tensor in (node.outputs[0], *(n.outputs[0] for n in chain[:-1])):
        ctx.encodings[tensor] = relu_encoding
    ctx.absorbed.update(n.name for n in chain)
    return node.with_attrs(activation="relu")


def is_absorbed(ctx: Xs3Context, node: Node) -> bool:
    """Whether ``node`` was fused into the convolution before it."""
    return node.name in ctx.absorbed


def pass_on(ctx: Xs3Context, node: Node) -> Layer:
    """An absorbed MINIMUM or RELU: the convolution's codes, unchanged."""
    enc = ctx.encoding(node.inputs[0])
    ctx.encodings[node.outputs[0]] = enc
    return ctx.layer(
        MoveLayer,
        node,
        op="fused into XC_conv2d_v2",
        inputs=node.inputs[:1],
        op_type="Identity",
        attrs=Attrs(),
        encoding=enc,
    )
